// Package shieldlua embeds the Lua half of the runtime: the prelude that makes
// pcall/xpcall and coroutines yield-safe, the spec runner, and the LuaLS type
// definitions (shield.d.lua, for editors only).
package shieldlua

import _ "embed"

// Prelude is run once per Lua state by the runtime (see prelude.lua).
//
//go:embed prelude.lua
var Prelude string

// Spec is the busted-compatible spec runner, loaded as require("shield.spec").
//
//go:embed spec.lua
var Spec string

// ChunkPrefix starts the chunk name of every embedded file, so error
// positions can skip frames that belong to the runtime rather than the user.
const ChunkPrefix = "<shield>/"
