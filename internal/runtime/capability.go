package runtime

import lua "github.com/yuin/gopher-lua"

// Capability is the runtime side of one row of the Module's capability
// table (the root package's capabilities.go): what a capability puts into
// the shield table of every new runtime. NewRuntime installs
// Services.Capabilities in their order, after the basics (sleep, spawn,
// now_ms, owner, log). Install runs on the loop, before any script.
type Capability interface {
	Install(rt *Runtime, lib *lua.LTable)
}

// InstallFunc adapts a function to Capability.
type InstallFunc func(rt *Runtime, lib *lua.LTable)

// Install implements Capability.
func (f InstallFunc) Install(rt *Runtime, lib *lua.LTable) { f(rt, lib) }
