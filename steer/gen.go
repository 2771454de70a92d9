package steer

// The eBPF object is generated from bpf/steer.c and committed, so `go build` needs no clang.
// Regenerate with `make generate` (installs clang, llvm and libbpf-dev first).
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu -I/usr/include/aarch64-linux-gnu" -target bpfel -type port -type rule -type rules -type path -type path_idx -type group -type slot_key -type pair -type path_port -type tuple -type addr -type flowkey -type expect6_key -type expect_key -type flow -type pick_key -type counter -type tunnel -type port_key -type mac_key steer bpf/steer.c
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu -I/usr/include/aarch64-linux-gnu" -target bpfel bump bpf/bump.c
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu -I/usr/include/aarch64-linux-gnu" -target bpfel fwoffload bpf/fwoffload.c
