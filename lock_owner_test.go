package shieldglobal

import (
	"testing"
)

// Lock info in another process shows the holder's service_name (the spec's
// 锁信息 owner = {node_id, service_id, service_name, thread_id}): the name
// is stored with the hold, for exclusive and shared holds, through
// re-entries and a partial release. Two modules on one Redis are two
// processes.
func TestLockInfoShowsAnotherProcessServiceName(t *testing.T) {
	for name, cfgFn := range map[string]func(*testing.T) Config{"redis": redisConfig, "cluster": clusterConfig} {
		t.Run(name, func(t *testing.T) {
			cfgA := cfgFn(t)
			cfgA.Global.NodeID, cfgA.Global.ServiceID, cfgA.Global.ServiceName = "node-a", 101, "boss_manager"
			cfgB := cfgA
			cfgB.Global.NodeID, cfgB.Global.ServiceID, cfgB.Global.ServiceName = "node-b", 202, "gate"
			a, b := newRuntime(t, newModule(t, cfgA)), newRuntime(t, newModule(t, cfgB))
			// A task holds the locks until told to let go (holds belong to
			// tasks and end with them).
			mustRunLua(t, a, `
				shield.spawn(function()
					local m = shield.distributed_mutex("svc_boss", { ttl = 60000 })
					assert(m:acquire()); assert(m:acquire())
					local r = shield.distributed_rwlock("svc_rw", { ttl = 60000 }):read_lock()
					assert(r:acquire()); assert(r:acquire()); r:release()
					holding = true
					while not done do shield.sleep(1) end
					m:release(); m:release(); r:release()
				end)
				while not holding do shield.sleep(1) end`)
			mustRunLua(t, b, `
				local info = assert(shield.distributed_mutex("svc_boss"):info())
				local o = info.owner
				assert(o.node_id == "node-a" and o.service_id == 101, o.node_id .. ":" .. tostring(o.service_id))
				assert(o.service_name == "boss_manager", "exclusive: service_name " .. tostring(o.service_name))
				assert(info.reentrant_count == 2, info.reentrant_count)
				local owner = assert(shield.distributed_mutex("svc_boss"):owner())
				assert(owner.service_name == "boss_manager", "owner(): " .. tostring(owner.service_name))
				local rinfo = assert(shield.distributed_rwlock("svc_rw"):read_lock():info())
				assert(rinfo.owner.service_name == "boss_manager", "shared: service_name " .. tostring(rinfo.owner.service_name))
				assert(rinfo.reentrant_count == 1, rinfo.reentrant_count)
				-- This process's own holds still show its own name.
				local mine = shield.distributed_mutex("svc_mine", { ttl = 60000 })
				assert(mine:acquire())
				assert(mine:info().owner.service_name == "gate")
				mine:release()`)
			mustRunLua(t, a, `done = true`)
		})
	}
}
