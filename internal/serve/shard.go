package serve

import (
	"crypto/md5"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/kvwatch/kvwatch/internal/pipeline"
	"github.com/kvwatch/kvwatch/internal/scrape"
)

// Shard splits the targets over several serve instances: instance Index of
// Count keeps the targets whose address hashes to Index, as Prometheus'
// relabeling does with
//
//   - source_labels: [__address__]
//     modulus: Count
//     target_label: __tmp_hash
//     action: hashmod
//   - source_labels: [__tmp_hash]
//     regex: Index
//     action: keep
//
// (the address is the target URL's host:port, exactly what a file_sd file
// lists), so a Prometheus or Prometheus agent sharded that way scrapes the
// same engines as the kvwatch serve of the same index. The Count instances
// together keep every target exactly once. The zero Shard keeps every target.
type Shard struct {
	// Index is this instance's shard, 0 ≤ Index < Count.
	Index int
	// Count is the number of shards; 0 or 1 means no sharding.
	Count int
}

// ParseShard reads "N/M" (shard N of M, counted from 0, as Prometheus'
// hashmod and vmagent's -promscrape.cluster.memberNum count).
func ParseShard(s string) (Shard, error) {
	a, b, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return Shard{}, fmt.Errorf("shard %q: want N/M, e.g. 0/2 and 1/2 for two serve instances", s)
	}
	n, err1 := strconv.Atoi(a)
	m, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil {
		return Shard{}, fmt.Errorf("shard %q: want N/M with whole numbers, e.g. 0/2", s)
	}
	if m < 1 {
		return Shard{}, fmt.Errorf("shard %q: the shard count M must be at least 1", s)
	}
	if n < 0 || n >= m {
		return Shard{}, fmt.Errorf("shard %q: N counts from 0 and must be below M (here 0 to %d)", s, m-1)
	}
	return Shard{Index: n, Count: m}, nil
}

// String is the N/M form; "" for no sharding.
func (s Shard) String() string {
	if s.Count <= 1 {
		return ""
	}
	return fmt.Sprintf("%d/%d", s.Index, s.Count)
}

// ShardOf returns the shard an address (host:port) falls in among count shards:
// the last 8 bytes of its MD5 sum, big-endian, modulo count (Prometheus'
// hashmod).
func ShardOf(address string, count int) int {
	if count <= 1 {
		return 0
	}
	sum := md5.Sum([]byte(address))
	return int(binary.BigEndian.Uint64(sum[8:]) % uint64(count))
}

// Keeps reports whether the shard keeps the target.
func (s Shard) Keeps(t *scrape.Target) bool {
	if s.Count <= 1 {
		return true
	}
	return ShardOf(t.URL.Host, s.Count) == s.Index
}

// apply returns setup with only the shard's targets (setup itself when the
// shard keeps everything).
func (s Shard) apply(setup *pipeline.Pipeline) *pipeline.Pipeline {
	if s.Count <= 1 || setup == nil {
		return setup
	}
	out := *setup
	out.Targets = make([]*scrape.Target, 0, len(setup.Targets)/s.Count+1)
	out.FileSDTargets = 0
	first := len(setup.Targets) - setup.FileSDTargets // file_sd targets come last
	for i, t := range setup.Targets {
		if !s.Keeps(t) {
			continue
		}
		out.Targets = append(out.Targets, t)
		if i >= first {
			out.FileSDTargets++
		}
	}
	return &out
}
