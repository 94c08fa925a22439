#!/usr/bin/env python3
"""Where an op's instructions go: bench/callgrind.sh's two callgrind.out
files of one case (KEEP=dir), differenced per op and grouped.

    python3 bench/callgrind_groups.py DIR CASE N1 N2

Each function of ours, of gopher-lua or of the standard library outside the
Go runtime "owns" its self cost plus the inclusive cost of its calls into Go
runtime helpers (map access, hashing, channel receive, memclr, write
barriers); the owners are then put in groups by name (GROUPS, first match).
The per-op numbers are (cost in the N2 run - cost in the N1 run) / (N2 - N1),
so setup cancels as in the totals. callcount grows its loop goroutine's stack
before the measured loop, so callgrind's call tracking (and with it the call
arcs used here) is not confused by a stack copy; the "owned" sum is printed
beside the exact total as a check.
"""
import collections
import re
import sys

HELPER = ('runtime.', 'internal/', 'aeshashbody', 'memeqbody', 'hash/maphash.', 'type:.hash', 'type:.eq',
          'sync/atomic.', 'sync.', 'indexbytebody', 'cmpbody', 'gcWriteBarrier')
SWITCH = ('runtime.mcall', 'runtime.gopark', 'runtime.morestack', 'runtime.systemstack', 'runtime.newstack',
          'runtime.goexit', 'runtime.park_m', 'runtime.schedule')

# (group, regexp on the owner's name), first match wins. gopher-lua's
# opcode handlers are init.3.funcN, N = opcode + 1 (vm.go's jumpTable).
GROUPS = [
    ('Lua VM: per-instruction interrupt check (vmContext.Done + select)',
     r'vmContext\)\.Done|mainLoopWithContext -> runtime\.selectnbrecv|mainLoopWithContext -> runtime\.chanrecv'),
    ('Lua VM: the for loop (OP_FORLOOP)', r'gopher-lua\.init\.3\.func29$'),
    ('Lua VM: lookups (globals, m:method through __index)',
     r'getFieldString|metaOp1|\(\*LState\)\.metatable|gopher-lua\.init\.3\.func(7|15)$|RawGetString'),
    ('Lua VM: dispatch, calls and returns (the instruction loop, OP_CALL/RETURN, frames, registers, Go-function calls)',
     r'gopher-lua\.init\.3\.func(26|28)$|callGFunction|CallFrameStack|registry\)|\(\*LState\)\.(Get|Push|GetTop|SetTop)$|gopher-lua\.mainLoopWithContext$'),
    ('Lua VM: other opcodes (the lock_inline.lua shim\'s compares and moves)', r'gopher-lua\.init\.3\.func\d+$|gopher-lua\.equals|Type$'),
    ('assert', r'baseAssert'),
    ('bindings: self / argument checks (SelfAs, __name, ModuleClosed, timeout)',
     r'lockBinding\)\.self|Args\.self|SelfAs|ModuleClosed|cancelCtx\)\.Err|acquireTimeout|runtime\.Args\.'),
    ('bindings: the methods\' glue (owner cache, MarkTask, results)', r'shieldglobal/bindings\.|internal/runtime\.'),
    ('core/lock: the session\'s hold record (map by key, Hold state)', r'shieldglobal/core/lock\.'),
    ('core/lock/local: the in-process manager (shard, entry, clock)', r'core/lock/local\.|internal/clock|^time\.'),
]


def parse(path):
    names, selfc = {}, collections.Counter()
    arcs = collections.defaultdict(collections.Counter)
    fn = cfn = None
    pending = False

    def name(s):
        m = re.match(r'\((\d+)\)(?:\s+(.*))?', s)
        if not m:
            return s.strip()
        if m.group(2):
            names[m.group(1)] = m.group(2).strip()
        return re.sub(r"'\d+$", '', names[m.group(1)])

    with open(path) as f:
        for line in f:
            if line.startswith('fn='):
                fn = name(line[3:])
            elif line.startswith('cfn='):
                cfn = name(line[4:])
            elif line.startswith('calls='):
                pending = True
            elif line[:1].isdigit() or line[:1] in '+-*':
                parts = line.split()
                if len(parts) < 2:
                    continue
                if pending:
                    arcs[fn][cfn] += int(parts[1])
                    pending = False
                else:
                    selfc[fn] += int(parts[1])
    return selfc, arcs


def helper(n):
    return n.startswith(HELPER) and not n.startswith(SWITCH)


def owned(path):
    selfc, arcs = parse(path)
    o = collections.Counter()
    for f, c in selfc.items():
        if not helper(f):
            o[f] += c
    for f, callees in arcs.items():
        if helper(f):
            continue
        for g, c in callees.items():
            if helper(g):
                o[f + ' -> ' + g if g in ('runtime.selectnbrecv', 'runtime.chanrecv') else f] += c
    return o, sum(selfc.values())


def main():
    d, case, n1, n2 = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    o1, t1 = owned(f'{d}/callgrind.out.{case}.{n1}')
    o2, t2 = owned(f'{d}/callgrind.out.{case}.{n2}')
    per = {k: (o2[k] - o1[k]) / (n2 - n1) for k in set(o1) | set(o2)}
    total = (t2 - t1) / (n2 - n1)
    groups, members = collections.Counter(), collections.defaultdict(list)
    for k, v in per.items():
        if abs(v) < 0.5:
            continue
        g = next((g for g, rx in GROUPS if re.search(rx, k)), 'other (Go scheduler, background goroutines)')
        groups[g] += v
        members[g].append((v, k))
    print(f'| {case}: group | Ir per op | share |\n|---|---:|---:|')
    for g, v in groups.most_common():
        print(f'| {g} | {v:.0f} | {100 * v / total:.1f} % |')
    print(f'| **total** (exact; owned sum {sum(groups.values()):.0f}) | **{total:.0f}** | |\n')
    other = groups['other (Go scheduler, background goroutines)']
    if abs(other) > 0.02 * total or abs(sum(groups.values()) - total) > 0.01 * total:
        # The Go scheduler's preemption of the loop goroutine (sysmon, every
        # 10 ms of wall time) switches stacks; now and then callgrind's call
        # tracking loses its place there and files later calls under the
        # wrong caller. The totals stay exact; the arcs of this pair of runs
        # do not: run them again.
        print(f'WARNING: {other:.0f} Ir per op unowned: callgrind lost track of callers in these runs; run them again\n')
    if '-v' in sys.argv:
        for g, v in groups.most_common():
            print(f'{g}: {v:.0f}')
            for mv, mk in sorted(members[g], reverse=True)[:12]:
                print(f'    {mv:7.1f}  {mk}')


if __name__ == '__main__':
    main()
