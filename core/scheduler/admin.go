package scheduler

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/shieldrt/shieldglobal/core/store"
)

// Names lists the distributed tasks recorded in Redis (every process's),
// sorted, for operator tools (the admin CLI): Engine.Get of each name reads
// its Info. Tasks that are not distributed live only in their process and
// are not listed. It scans the key space (every master of a Cluster).
func (r *Redis) Names(ctx context.Context) ([]string, error) {
	keys, err := store.ScanKeys(ctx, r.c, r.keys.Prefix+"scheduler:task:{*}")
	if err != nil {
		return nil, fmt.Errorf("scheduler: list names: %w", err)
	}
	names := make([]string, 0, len(keys))
	for _, k := range keys {
		rest := strings.TrimPrefix(k, r.keys.Prefix+"scheduler:task:{")
		if name, ok := strings.CutSuffix(rest, "}"); ok && rest != k && name != "" {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names, nil
}
