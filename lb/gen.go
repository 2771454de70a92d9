package lb

// The eBPF object of accel sockmap is generated from bpf/sockmap.c and committed, so
// `go build` needs no clang. Regenerate with `make generate`.
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu -I/usr/include/aarch64-linux-gnu" -target bpfel -type sock_key sockmap bpf/sockmap.c
