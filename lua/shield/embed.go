// Package shieldlua embeds the Lua half of the runtime: the prelude that makes
// pcall/xpcall and coroutines yield-safe, the spec runner, and the LuaLS type
// definitions (shield.d.lua, for editors only).
package shieldlua

import _ "embed"

// Prelude is run once per Lua state by the runtime (see prelude.lua).
//
//go:embed prelude.lua
var Prelude string

// Spec is the busted-compatible spec runner, loaded as require("shield.spec"):
// the test doubles (spec_doubles.lua, which defines make_doubles) and then
// spec.lua, as one chunk, so the runner needs a single preload entry.
var Spec = specDoubles + "\n" + specRunner

//go:embed spec.lua
var specRunner string

//go:embed spec_doubles.lua
var specDoubles string

// ChunkPrefix starts the chunk name of every embedded file, so error
// positions can skip frames that belong to the runtime rather than the user.
const ChunkPrefix = "<shield>/"
