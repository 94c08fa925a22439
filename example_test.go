package shieldglobal_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"time"

	lua "github.com/yuin/gopher-lua"

	shieldglobal "github.com/shieldrt/shieldglobal"
)

var quiet = shieldglobal.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))

// One Module per process: here on the embedded memory backend (no Redis
// configured).
func ExampleNew() {
	mod, err := shieldglobal.New(shieldglobal.DefaultConfig(), quiet)
	if err != nil {
		log.Fatal(err)
	}
	defer mod.Close()
	fmt.Println(mod.Backend())
	// Output: memory
}

// One Runtime per Lua state; scripts run as tasks on its loop.
func ExampleModule_NewRuntime() {
	mod, _ := shieldglobal.New(shieldglobal.DefaultConfig(), quiet)
	defer mod.Close()
	L := lua.NewState(shieldglobal.StateOptions())
	defer L.Close()
	rt, err := mod.NewRuntime(L)
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(5 * time.Second)
	err = rt.RunString(`
		local g = shield.global()
		g:set("motd", "welcome")
		print(g:get("motd"))`, "main.lua")
	fmt.Println(err)
	// Output:
	// welcome
	// <nil>
}

// Runtime.Call runs a script function as a task (it may block) and returns
// its results.
func ExampleRuntime_Call() {
	mod, _ := shieldglobal.New(shieldglobal.DefaultConfig(), quiet)
	defer mod.Close()
	L := lua.NewState()
	defer L.Close()
	rt, _ := mod.NewRuntime(L)
	defer rt.Close(time.Second)
	_ = rt.RunString(`
		handlers = {}
		function handlers.on_login(uid, level)
			shield.sleep(1) -- a blocking call: only this task waits
			return "welcome " .. uid, level + 1
		end`, "game.lua")
	vals, err := rt.Call(context.Background(), "handlers.on_login", "player_1", 9)
	fmt.Println(vals, err)
	// Output: [welcome player_1 10] <nil>
}

// Runtime.Set hands Go functions and values to scripts; a Go error raises
// in Lua with the function's name.
func ExampleRuntime_Set() {
	mod, _ := shieldglobal.New(shieldglobal.DefaultConfig(), quiet)
	defer mod.Close()
	L := lua.NewState()
	defer L.Close()
	rt, _ := mod.NewRuntime(L)
	defer rt.Close(time.Second)
	gold := map[string]int{}
	_ = rt.Set("give_reward", func(ctx context.Context, uid string, amount int) error {
		if amount <= 0 {
			return fmt.Errorf("amount must be positive, got %d", amount)
		}
		gold[uid] += amount
		return nil
	})
	err := rt.RunString(`
		give_reward("player_1", 50)
		local ok, err = pcall(give_reward, "player_1", -5)
		print(tostring(ok) .. " " .. err)`, "reward.lua")
	fmt.Println(gold["player_1"], err)
	// Output:
	// false reward.lua:3: give_reward: amount must be positive, got -5
	// 50 <nil>
}

// Module.ExposeAsync hands scripts a slow host function (a database load,
// an HTTP call) that runs off the loop: only the calling task waits, so
// the five logins below take one load's time, not five.
func ExampleModule_ExposeAsync() {
	mod, _ := shieldglobal.New(shieldglobal.DefaultConfig(), quiet)
	defer mod.Close()
	err := mod.ExposeAsync("load_player", func(ctx context.Context, uid string) (string, error) {
		select {
		case <-time.After(200 * time.Millisecond): // the database
			return "name of " + uid, nil
		case <-ctx.Done(): // the calling task ended, or the runtime closed
			return "", ctx.Err()
		}
	})
	if err != nil {
		log.Fatal(err)
	}
	L := lua.NewState()
	defer L.Close()
	rt, _ := mod.NewRuntime(L)
	defer rt.Close(time.Second)
	err = rt.RunString(`
		local names, loaded = {}, 0
		for i = 1, 5 do
			shield.spawn(function() names[i] = load_player("p" .. i); loaded = loaded + 1 end)
		end
		while loaded < 5 do shield.sleep(10) end
		print(table.concat(names, ", "))`, "login.lua")
	fmt.Println(err)
	// Output:
	// name of p1, name of p2, name of p3, name of p4, name of p5
	// <nil>
}
