// Command embed is a small game-server stub that embeds shield_global: it
// creates the Module from config/global.yaml, exposes two host functions to
// the scripts (give_reward, show_notification), loads the game logic
// (examples/embed/game.lua), dispatches a burst of simulated player requests
// into it from many goroutines through Runtime.Call, and shuts down cleanly
// on SIGINT/SIGTERM (or at once with -once).
//
//	go run ./examples/embed            # from the repository root; memory backend
//	go run ./examples/embed -once      # exit after the burst
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	lua "github.com/yuin/gopher-lua"

	shieldglobal "github.com/shieldrt/shieldglobal"
)

func main() {
	cfgPath := flag.String("config", "config/global.yaml", "shield_global config")
	script := flag.String("script", "examples/embed/game.lua", "game logic")
	players := flag.Int("players", 200, "simulated players")
	workers := flag.Int("workers", 16, "goroutines dispatching requests")
	once := flag.Bool("once", false, "exit after the burst instead of waiting for SIGTERM")
	flag.Parse()
	if err := run(*cfgPath, *script, *players, *workers, *once); err != nil {
		log.Fatal(err)
	}
}

func run(cfgPath, script string, players, workers int, once bool) error {
	cfg, err := shieldglobal.LoadConfig(cfgPath)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	mod, err := shieldglobal.New(cfg, shieldglobal.WithLogger(logger))
	if err != nil {
		return err
	}
	defer mod.Close()

	// The game server's own functions, callable from every script.
	var rewarded, notified atomic.Int64
	mod.Expose("give_reward", func(uid, reward string) { rewarded.Add(1) })
	mod.Expose("show_notification", func(text string) {
		notified.Add(1)
		fmt.Println("notification:", text)
	})

	L := lua.NewState(shieldglobal.StateOptions())
	defer L.Close()
	rt, err := mod.NewRuntime(L)
	if err != nil {
		return err
	}
	defer rt.Close(5 * time.Second)
	if err := rt.Set("REWARD_DELAY_MS", 200); err != nil { // a day in the spec; short here
		return err
	}
	if err := rt.Set("BOSS_HP", players*50); err != nil {
		return err
	}
	if err := rt.RunFile(script); err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	// The burst: every player logs in and hits the boss, from many goroutines.
	start := time.Now()
	var wg sync.WaitGroup
	var failed atomic.Int64
	ids := make(chan int)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range ids {
				uid := fmt.Sprintf("player_%d", i)
				if _, err := rt.Call(ctx, "handlers.on_login", uid); err != nil {
					failed.Add(1)
					logger.Error("on_login", "uid", uid, "error", err)
				}
				if _, err := rt.Call(ctx, "handlers.attack_boss", uid, 40+i%30); err != nil {
					failed.Add(1)
					logger.Error("attack_boss", "uid", uid, "error", err)
				}
			}
		}()
	}
	for i := 1; i <= players; i++ {
		ids <- i
	}
	close(ids)
	wg.Wait()
	took := time.Since(start)
	top, err := rt.Call(ctx, "handlers.top", 3)
	if err != nil {
		return err
	}
	var best string
	_ = rt.Do(func(*lua.LState) error { // results are Lua tables: read them on the loop
		if t, ok := top[0].(*lua.LTable); ok {
			first := t.RawGetInt(1).(*lua.LTable)
			best = fmt.Sprintf("%s with %v", first.RawGetString("uid"), first.RawGetString("score"))
		}
		return nil
	})
	fmt.Printf("requests=%d failed=%d took=%v (%.0f calls/s) best_hit=%s\n",
		2*players, failed.Load(), took.Round(time.Millisecond), float64(2*players)/took.Seconds(), best)

	// Let the delayed rewards come due, then report.
	deadline := time.Now().Add(5 * time.Second)
	for rewarded.Load() < int64(players) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Printf("rewards=%d notifications=%d\n", rewarded.Load(), notified.Load())
	if !once {
		fmt.Println("serving; SIGTERM to stop")
		<-ctx.Done()
	}
	fmt.Println("shutting down")
	return nil
}
