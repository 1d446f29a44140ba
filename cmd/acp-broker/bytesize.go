package main

import (
	"fmt"
	"strconv"
	"strings"
)

// byteSize is a flag value for sizes such as 64MiB, 10MB or 1048576.
type byteSize int

var byteUnits = []struct {
	suffix string
	factor int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
	{"KB", 1000}, {"MB", 1000 * 1000}, {"GB", 1000 * 1000 * 1000},
	{"B", 1},
}

func (b *byteSize) String() string {
	n := int64(*b)
	for _, u := range []struct {
		suffix string
		factor int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.factor && n%u.factor == 0 {
			return fmt.Sprintf("%d%s", n/u.factor, u.suffix)
		}
	}
	return strconv.FormatInt(n, 10)
}

func (b *byteSize) Set(s string) error {
	num, factor := strings.TrimSpace(s), int64(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(num, u.suffix) {
			num, factor = strings.TrimSpace(strings.TrimSuffix(num, u.suffix)), u.factor
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 {
		return fmt.Errorf("%q is not a size (examples: 64MiB, 10MB, 1048576)", s)
	}
	const limit = 1 << 31
	if n > limit/factor {
		return fmt.Errorf("%q is larger than 2GiB", s)
	}
	*b = byteSize(n * factor)
	return nil
}

func (b *byteSize) Type() string { return "size" }
