package pktgen

import (
	"errors"
	"time"

	"golang.org/x/sys/unix"
)

// WarmPath resolves a path's neighbours before frames are built by hand: it writes small
// datagrams on sfd (a UDP socket connected to the far end's closed port) every 10 ms until
// the far end's ICMP port unreachable comes back (every hop's neighbour then resolved, both
// ways) or the timeout passes. A fixed few datagrams were not enough on a loaded 2-core host:
// the generator then found no neighbour entry for the next hop, or the forwarder had none
// for the destination and dropped every frame. A path that never answers (a firewall that
// drops the port, a reflector already attached) only costs the timeout: the caller's own
// checks (FlowFrom's neighbour look-up) say what is missing then.
func WarmPath(sfd int, timeout time.Duration) {
	for end := time.Now().Add(timeout); time.Now().Before(end); {
		if _, err := unix.Write(sfd, make([]byte, 16)); errors.Is(err, unix.ECONNREFUSED) {
			return
		}
		time.Sleep(10 * time.Millisecond)
		if e, err := unix.GetsockoptInt(sfd, unix.SOL_SOCKET, unix.SO_ERROR); err == nil && e == int(unix.ECONNREFUSED) {
			return
		}
	}
}
