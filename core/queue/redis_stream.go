package queue

import "errors"

type redisStream struct{}

func newRedisStream(r *Redis, kind Kind, name string, o Options) *redisStream { return nil }
func (s *redisStream) close()                                              {}
func (s *redisStream) receiver(string) *redisReceiver                      { return nil }

type redisReceiver struct{ Reliable }
type redisReliable struct{ *redisReceiver }
type redisBroadcast struct {
	Broadcast
	s *redisStream
}

var errTODO = errors.New("todo")
