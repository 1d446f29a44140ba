package jsonrpc

import "syscall"

// handBack gives the kernel the pages of buf, a buffer about to be dropped,
// at once, rather than when the collector has freed it and the runtime has
// returned its memory. buf is a large allocation of its own (a block or a
// frame buffer, page-aligned by the allocator) that nothing reads again; a
// page given back reads as zeros if the runtime reuses it.
func handBack(buf []byte) { _ = syscall.Madvise(buf[:cap(buf)], syscall.MADV_DONTNEED) }
