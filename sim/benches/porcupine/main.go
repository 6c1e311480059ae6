// Command porcupine checks key-value histories with Porcupine (github.com/anishathalye/porcupine,
// used as a library through the Go module proxy) and times the check, for the comparison with
// sim's linearizability checker (`cargo bench -p sim --bench linearizable`).
//
// Input: one or more history files, JSON lines, one operation per line:
//
//	{"client":3,"call":1200,"ret":1900,"op":"get","key":"k0","output":"ab"}
//	{"client":4,"call":1300,"ret":null,"op":"append","key":"k0","value":"c"}
//	{"client":5,"call":1400,"ret":2000,"op":"cas","key":"k1","expected":null,"value":"d","wrote":true}
//
// Times are integer nanoseconds of fake time; "ret": null is an indeterminate operation (its
// return is at infinity and its output unknown, as in Porcupine's own etcd tests); "output": null
// or "expected": null is an absent key, which this model reads as "" (Porcupine's kv convention;
// the generated histories never write "").
//
// Output: one JSON line per file: {"file":…,"verdict":"Ok"|"Illegal"|"Unknown","median_ns":…,
// "runs_ns":[…]} (Porcupine's CheckResult; Unknown: the timeout was reached). Only
// porcupine.CheckOperationsTimeout is timed. Porcupine checks partitions in parallel goroutines:
// set GOMAXPROCS to compare on a given number of cores.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

type line struct {
	Client   int     `json:"client"`
	Call     int64   `json:"call"`
	Ret      *int64  `json:"ret"`
	Op       string  `json:"op"`
	Key      string  `json:"key"`
	Value    string  `json:"value"`
	Output   *string `json:"output"`
	Expected *string `json:"expected"`
	Wrote    bool    `json:"wrote"`
}

type kvInput struct {
	op       string
	key      string
	value    string
	expected string
}

type kvOutput struct {
	value   string
	wrote   bool
	unknown bool
}

func orEmpty(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// The per-key model: the state is the key's value.
var kvModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(kvInput).key
			if _, seen := byKey[k]; !seen {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		sort.Strings(keys)
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() interface{} { return "" },
	Step: func(state, in, out interface{}) (bool, interface{}) {
		s := state.(string)
		i := in.(kvInput)
		o := out.(kvOutput)
		switch i.op {
		case "get":
			return o.unknown || o.value == s, s
		case "put":
			return true, i.value
		case "append":
			return true, s + i.value
		case "cas":
			if o.unknown {
				if s == i.expected {
					return true, i.value
				}
				return true, s
			}
			if s == i.expected {
				return o.wrote, i.value
			}
			return !o.wrote, s
		}
		panic("unknown op " + i.op)
	},
	Equal: func(a, b interface{}) bool { return a.(string) == b.(string) },
	Hash: func(state interface{}) uint64 {
		h := fnv.New64a()
		h.Write([]byte(state.(string)))
		return h.Sum64()
	},
}

func load(path string) ([]porcupine.Operation, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ops []porcupine.Operation
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 1<<26)
	for n := 1; scanner.Scan(); n++ {
		var l line
		if err := json.Unmarshal(scanner.Bytes(), &l); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		ret := int64(math.MaxInt64)
		out := kvOutput{unknown: true}
		if l.Ret != nil {
			ret = *l.Ret
			out = kvOutput{value: orEmpty(l.Output), wrote: l.Wrote}
		}
		ops = append(ops, porcupine.Operation{
			ClientId: l.Client,
			Input:    kvInput{op: l.Op, key: l.Key, value: l.Value, expected: orEmpty(l.Expected)},
			Call:     l.Call,
			Output:   out,
			Return:   ret,
		})
	}
	return ops, scanner.Err()
}

type result struct {
	File     string  `json:"file"`
	Verdict  string  `json:"verdict"`
	MedianNs int64   `json:"median_ns"`
	RunsNs   []int64 `json:"runs_ns"`
}

func main() {
	runs := flag.Int("runs", 5, "checks per file; the median is reported")
	timeout := flag.Duration("timeout", 60*time.Second, "per check; reaching it is verdict Unknown")
	flag.Parse()
	for _, path := range flag.Args() {
		ops, err := load(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		r := result{File: path}
		for k := 0; k < *runs; k++ {
			start := time.Now()
			verdict := porcupine.CheckOperationsTimeout(kvModel, ops, *timeout)
			r.RunsNs = append(r.RunsNs, time.Since(start).Nanoseconds())
			r.Verdict = string(verdict)
			if verdict == porcupine.Unknown {
				break // another run would only time out again
			}
		}
		sorted := append([]int64(nil), r.RunsNs...)
		sort.Slice(sorted, func(a, b int) bool { return sorted[a] < sorted[b] })
		r.MedianNs = sorted[len(sorted)/2]
		out, _ := json.Marshal(r)
		fmt.Println(string(out))
	}
}
