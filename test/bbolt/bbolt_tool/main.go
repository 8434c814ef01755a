// bbolt_tool: real bbolt (go.etcd.io/bbolt, Debian's golang-github-coreos-bbolt-dev, the 1.3
// line etcd 3.4 links) as the reference for test/bbolt/real_bbolt.test.ts.
//
//	bbolt_tool dump FILE          Tx.Check, then every bucket and key (read-only open)
//	bbolt_tool mutate FILE SEED   opens read-write, adds and deletes keys in every bucket, commits, then dump
//	bbolt_tool gen FILE SEED [N]  writes a new database (nested, inline, big values, N keys in "many"; 30000), then dump
//
// dump prints "B <path>" for a bucket and "K <path> <key> <len> <sha256>" for a key, paths as
// hex names joined by '/', in bbolt's order; any Tx.Check error is printed as "ERR <text>" and
// the exit status is 1.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"strings"

	bolt "go.etcd.io/bbolt"
)

func pathOf(names [][]byte) string {
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = hex.EncodeToString(n)
	}
	return strings.Join(parts, "/")
}

func dumpBucket(b *bolt.Bucket, path [][]byte, out *strings.Builder) {
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		p := append(append([][]byte{}, path...), append([]byte{}, k...))
		if v == nil {
			fmt.Fprintf(out, "B %s\n", pathOf(p))
			dumpBucket(b.Bucket(k), p, out)
			continue
		}
		sum := sha256.Sum256(v)
		fmt.Fprintf(out, "K %s %s %d %s\n", pathOf(path), hex.EncodeToString(k), len(v), hex.EncodeToString(sum[:]))
	}
}

func dump(file string) {
	db, err := bolt.Open(file, 0400, &bolt.Options{ReadOnly: true})
	if err != nil {
		fmt.Printf("ERR open: %v\n", err)
		os.Exit(1)
	}
	defer db.Close()
	var out strings.Builder
	failed := false
	err = db.View(func(tx *bolt.Tx) error {
		for e := range tx.Check() {
			fmt.Printf("ERR %v\n", e)
			failed = true
		}
		c := tx.Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			p := [][]byte{append([]byte{}, k...)}
			fmt.Fprintf(&out, "B %s\n", pathOf(p))
			dumpBucket(tx.Bucket(k), p, &out)
		}
		return nil
	})
	if err != nil {
		fmt.Printf("ERR view: %v\n", err)
		os.Exit(1)
	}
	fmt.Print(out.String())
	if failed {
		os.Exit(1)
	}
}

func value(r *rand.Rand) []byte {
	n := r.Intn(80)
	if r.Intn(40) == 0 {
		n = 5000 + r.Intn(20000)
	}
	v := make([]byte, n)
	r.Read(v)
	return v
}

func mutateBucket(b *bolt.Bucket, r *rand.Rand, depth int) error {
	var keys, buckets [][]byte
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if v == nil {
			buckets = append(buckets, append([]byte{}, k...))
		} else {
			keys = append(keys, append([]byte{}, k...))
		}
	}
	for i, k := range keys {
		if i%3 == 0 {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
	}
	for i := 0; i < 50+r.Intn(200); i++ {
		if err := b.Put([]byte(fmt.Sprintf("m%06d", r.Intn(1000000))), value(r)); err != nil {
			return err
		}
	}
	if depth < 2 && r.Intn(2) == 0 {
		nb, err := b.CreateBucketIfNotExists([]byte(fmt.Sprintf("nb%d", r.Intn(10))))
		if err != nil {
			return err
		}
		if err := nb.Put([]byte("x"), []byte("y")); err != nil {
			return err
		}
	}
	for _, k := range buckets {
		if err := mutateBucket(b.Bucket(k), r, depth+1); err != nil {
			return err
		}
	}
	return nil
}

func mutate(file string, seed int64) {
	db, err := bolt.Open(file, 0600, nil)
	if err != nil {
		fmt.Printf("ERR open: %v\n", err)
		os.Exit(1)
	}
	r := rand.New(rand.NewSource(seed))
	err = db.Update(func(tx *bolt.Tx) error {
		var names [][]byte
		tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
			names = append(names, append([]byte{}, name...))
			return nil
		})
		for _, n := range names {
			if err := mutateBucket(tx.Bucket(n), r, 0); err != nil {
				return err
			}
		}
		return nil
	})
	db.Close()
	if err != nil {
		fmt.Printf("ERR update: %v\n", err)
		os.Exit(1)
	}
	dump(file)
}

func gen(file string, seed int64, many int) {
	db, err := bolt.Open(file, 0600, nil)
	if err != nil {
		fmt.Printf("ERR open: %v\n", err)
		os.Exit(1)
	}
	r := rand.New(rand.NewSource(seed))
	err = db.Update(func(tx *bolt.Tx) error {
		manyKeys := many
		many, err := tx.CreateBucket([]byte("many"))
		if err != nil {
			return err
		}
		for i := 0; i < manyKeys; i++ {
			if err := many.Put([]byte(fmt.Sprintf("k%08d", r.Intn(100000000))), value(r)); err != nil {
				return err
			}
		}
		for _, name := range []string{"a", "b", "c"} {
			top, err := tx.CreateBucket([]byte(name))
			if err != nil {
				return err
			}
			for j := 0; j < r.Intn(5); j++ {
				if err := top.Put([]byte(fmt.Sprintf("v%d", j)), value(r)); err != nil {
					return err
				}
			}
			for j := 0; j < 4; j++ {
				child, err := top.CreateBucket([]byte(fmt.Sprintf("child%d", j)))
				if err != nil {
					return err
				}
				n := []int{0, 3, 300, 3000}[j] // empty, inline, one page or more, many pages
				if n > manyKeys/10 {
					n = manyKeys / 10
				}
				for k := 0; k < n; k++ {
					if err := child.Put([]byte(fmt.Sprintf("c%06d", k)), value(r)); err != nil {
						return err
					}
				}
				if j == 2 {
					if _, err := child.CreateBucket([]byte("grandchild")); err != nil {
						return err
					}
				}
			}
		}
		return nil
	})
	if err == nil {
		// A second transaction frees pages: the freelist then holds ids.
		err = db.Update(func(tx *bolt.Tx) error {
			c := tx.Bucket([]byte("many")).Cursor()
			i := 0
			for k, _ := c.First(); k != nil; k, _ = c.Next() {
				if i%2 == 0 {
					if err := c.Delete(); err != nil {
						return err
					}
				}
				i++
			}
			return nil
		})
	}
	db.Close()
	if err != nil {
		fmt.Printf("ERR update: %v\n", err)
		os.Exit(1)
	}
	dump(file)
}

func main() {
	if len(os.Args) < 3 {
		fmt.Println("usage: bbolt_tool dump|mutate|gen FILE [SEED]")
		os.Exit(2)
	}
	seed := int64(1)
	if len(os.Args) > 3 {
		s, err := strconv.ParseInt(os.Args[3], 10, 64)
		if err != nil {
			fmt.Println("bad seed")
			os.Exit(2)
		}
		seed = s
	}
	switch os.Args[1] {
	case "dump":
		dump(os.Args[2])
	case "mutate":
		mutate(os.Args[2], seed)
	case "gen":
		n := 30000
		if len(os.Args) > 4 {
			v, err := strconv.Atoi(os.Args[4])
			if err != nil {
				fmt.Println("bad key count")
				os.Exit(2)
			}
			n = v
		}
		gen(os.Args[2], seed, n)
	default:
		fmt.Println("unknown command")
		os.Exit(2)
	}
}
