package deploy

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sfclab/sfclab/journal"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/runtime"
)

// lateRuntime is a runtime whose engine completes creates after destroy has listed the lab's
// objects: every Destroy removes what is there, then `late` more objects appear (one per
// Destroy call, while late > 0), as a container create a killed deploy left in flight does.
type lateRuntime struct {
	runtime.Runtime // only Name, Leftovers and Destroy are called
	mu              sync.Mutex
	objects, late   int
	destroys        int
}

func (r *lateRuntime) Name() string { return "late" }

// ownRuntime is a lateRuntime that says it makes every object in sfclab's own process
// (runtime.OwnCreates), as netns does.
type ownRuntime struct{ *lateRuntime }

func (ownRuntime) CreatesOnlyInProcess() bool { return true }

func (r *lateRuntime) Leftovers(context.Context, string) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.objects > 0 {
		return []string{"container late-1"}, nil
	}
	return nil, nil
}

func (r *lateRuntime) Destroy(context.Context, string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.destroys++
	r.objects = 0
	if r.late > 0 {
		r.late--
		r.objects = 1
	}
	return nil
}

// TestDestroySettlesUnfinishedDeploy: destroying a lab whose deploy did not finish looks again
// after a grace and removes objects that landed after the first removal; a lab that was
// ready is removed in one pass; objects that keep appearing end in an error naming why.
func TestDestroySettlesUnfinishedDeploy(t *testing.T) {
	requireRoot(t)
	defer func(g time.Duration) { SettleGrace = g }(SettleGrace)
	SettleGrace = 10 * time.Millisecond
	for _, tc := range []struct {
		name         string
		own          bool
		status       string
		late         int
		wantDestroys int
		wantLeft     int
		wantErr      string
	}{
		{name: "killed deploy, one late create", status: journal.StatusDeploying, late: 1, wantDestroys: 2},
		{name: "killed deploy, two late creates", status: journal.StatusDeploying, late: 2, wantDestroys: 3},
		{name: "killed deploy, nothing late", status: journal.StatusDeploying, wantDestroys: 1},
		{name: "ready lab, one pass", status: journal.StatusReady, late: 1, wantDestroys: 1, wantLeft: 1},
		{name: "creates keep coming", status: journal.StatusDeploying, late: 100, wantDestroys: 1 + settleRounds, wantLeft: 1, wantErr: "keep appearing"},
		// A runtime that makes everything in sfclab's process gets no second look: the late
		// create (which it cannot have) is not waited for.
		{name: "killed deploy, own creates, one pass", own: true, status: journal.StatusDeploying, late: 1, wantDestroys: 1, wantLeft: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := &lateRuntime{objects: 1, late: tc.late}
			var as runtime.Runtime = rt
			if tc.own {
				as = ownRuntime{rt}
			}
			d := &Deployer{Journal: journal.Journal{Root: t.TempDir()}, Runtimes: map[string]runtime.Runtime{"late": as}}
			if err := d.Journal.Create("t-late"); err != nil {
				t.Fatal(err)
			}
			if err := d.Journal.WritePlan(&plan.Plan{Lab: "t-late", Runtime: "late"}); err != nil {
				t.Fatal(err)
			}
			if err := d.Journal.WriteState(&journal.State{Lab: "t-late", Status: tc.status, Started: time.Now()}); err != nil {
				t.Fatal(err)
			}
			err := d.Destroy(context.Background(), "t-late")
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("destroy: %v, want error %q", err, tc.wantErr)
			}
			if rt.destroys != tc.wantDestroys || rt.objects != tc.wantLeft {
				t.Errorf("runtime destroyed %d times, %d objects left; want %d and %d", rt.destroys, rt.objects, tc.wantDestroys, tc.wantLeft)
			}
		})
	}
}
