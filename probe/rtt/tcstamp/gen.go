package tcstamp

// The eBPF object is generated from bpf/tcstamp.c and committed, so `go build` needs no clang.
// Regenerate with `make generate` (installs clang, llvm and libbpf-dev first).
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu -I/usr/include/aarch64-linux-gnu" -target bpfel -type stamp tcstamp bpf/tcstamp.c
