package deploy

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/steer"
)

// TestTransparentDeploy deploys the transparent example (forwarder, tap, stateful firewall,
// symmetric), sends ICMP and TCP through it, reads the per-hop counters from the pinned maps,
// and checks destroy leaves no pinned map.
func TestTransparentDeploy(t *testing.T) {
	requireRoot(t)
	d := testDeployer(t)
	p := loadPlan(t, "../examples/transparent-fw.yaml", "steer-dfw")
	t.Cleanup(func() { // runs after deploy's cleanup has destroyed the lab
		if _, err := os.Stat(steer.PinDir(p.Lab)); err == nil {
			t.Errorf("destroy left pinned maps in %s", steer.PinDir(p.Lab))
		}
	})
	deploy(t, d, p)
	client, server := node(t, d, p, "client"), node(t, d, p, "server")
	srvAddr := p.Transparent.Node("server").Ports[0].Address.Addr().String()
	if out, err := client.Output(context.Background(), nil, "ping", "-c", "2", "-i", "0.2", "-W", "2", srvAddr); err != nil {
		t.Fatalf("ping through the firewall: %v\n%s", err, out)
	}
	if _, err := server.Daemon([]string{"iperf3", "-s", "-1", "-p", "5201"}, t.TempDir()+"/iperf3.log"); err != nil {
		t.Fatal(err)
	}
	var out []byte
	var err error
	for range 40 {
		out, err = client.Output(context.Background(), nil, "iperf3", "-c", srvAddr, "-t", "1")
		if err == nil || !strings.Contains(err.Error(), "refused") {
			break
		}
	}
	if err != nil {
		t.Fatalf("iperf3 through the symmetric chain: %v\n%s", err, out)
	}
	dp, err := steer.Open(p.Lab)
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	cs, err := dp.Counters()
	if err != nil {
		t.Fatal(err)
	}
	got := map[[2]uint32]uint64{}
	for _, c := range cs {
		got[[2]uint32{c.Path, c.Hop}] = c.Packets
	}
	web := p.Transparent.Tables.ChainPath("web")
	for hop := uint32(0); hop <= 3; hop++ {
		if got[[2]uint32{web, hop}] == 0 || got[[2]uint32{web | 1, hop}] == 0 {
			t.Errorf("web chain hop %d: forward %d, reverse %d packets", hop, got[[2]uint32{web, hop}], got[[2]uint32{web | 1, hop}])
		}
	}
}
