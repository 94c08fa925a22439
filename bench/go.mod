module github.com/shieldrt/shieldglobal/bench

go 1.26.8

require (
	github.com/bsm/redislock v0.9.4
	github.com/go-redsync/redsync/v4 v4.18.1
	github.com/shieldrt/shieldglobal v0.0.0
)

replace github.com/shieldrt/shieldglobal => ../
