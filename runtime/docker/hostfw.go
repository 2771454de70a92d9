package docker

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/sfclab/sfclab/plan"
)

// The engine's rules for an internal network drop, in the host's FORWARD chain, every packet
// entering its bridge from outside its subnet or leaving it for outside its subnet
// (DOCKER-ISOLATION-STAGE-1: `-i BR ! -d SUBNET -j DROP`, `-o BR ! -s SUBNET -j DROP`). With
// br_netfilter loaded (bridge-nf-call-iptables=1, as the engine sets it) bridged frames cross
// that chain too, so the chain's own traffic, client 198.18.0.1 to server 198.18.2.2 through a
// function, is dropped on the first bridge. sfclab therefore accepts traffic that stays on
// one lab bridge in DOCKER-USER, the chain the engine keeps for its users and evaluates first.
// Each rule carries the comment "sfclab lab=LAB" so that Destroy finds it without the lab
// file; nothing else is accepted, so the isolation of internal networks stays otherwise whole.

// In nat mode the chain's source reaches the target at the port published on its network's
// gateway address. For a client outside the host the engine carries that port with a kernel
// DNAT rule (nat DOCKER: `-d GW ! -i BR -p tcp --dport P -j DNAT --to-destination T:P`,
// conntrack undoing it on the replies). For the source, which sits on the same bridge BR, it
// does not: with its userland proxy on (this engine's default) its nat rules return every
// packet entering from one of its bridges (`-A DOCKER -i BR -j RETURN`), and the proxy,
// docker-proxy, a user-space process, accepts the connection on GW:P and opens another to
// T:P, so the target sees GW as the source and every byte is copied twice through user space.
// sfclab therefore adds, per published port, the DNAT the engine would use with the userland
// proxy off, for the source's bridge only, in nat PREROUTING (natRule): the chain's traffic
// takes the path an external client's took in study B, and the target sees the source's own
// address. The reply stays on the bridge (target and source share it); br_netfilter, which the
// engine switches on (bridge-nf-call-iptables=1), sends it through conntrack, which restores
// GW:P as its source. The rules carry the same "sfclab lab=LAB" comment and go with the lab.

// UserChain is the engine's chain for its users' own forwarding rules.
const UserChain = "DOCKER-USER"

// ruleComment tags a lab's host rules (DOCKER-USER and nat PREROUTING).
func ruleComment(lab string) string { return "sfclab lab=" + lab }

// bridgeRule is a lab's DOCKER-USER rule for one internal bridge.
func bridgeRule(bridge, lab string) []string {
	return []string{"-i", bridge, "-o", bridge, "-m", "comment", "--comment", ruleComment(lab), "-j", "ACCEPT"}
}

// iptables runs the host's iptables (the same binary the engine uses) with the xtables lock.
func iptables(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "iptables", append([]string{"-w"}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("run iptables %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// userChainExists reports whether the engine manages iptables (it creates DOCKER-USER); with
// `"iptables": false` it adds no isolation rules and sfclab needs none either.
func userChainExists(ctx context.Context) bool {
	if _, err := exec.LookPath("iptables"); err != nil {
		return false
	}
	_, err := iptables(ctx, "-S", UserChain)
	return err == nil
}

// The host's tables sfclab writes rules into: DOCKER-USER of the filter table (routed
// traffic on a lab bridge, above) and PREROUTING of the nat table (the published port's DNAT
// for the chain's source, see natRule).
const (
	tableFilter = "filter"
	tableNAT    = "nat"
	// PreroutingChain is the nat chain where sfclab DNATs the chain's source to the
	// published port's target (attach nat).
	PreroutingChain = "PREROUTING"
)

// hostRule is one rule of a host table chain: its words after "-A CHAIN" (or -I/-D).
type hostRule struct {
	table, chain string
	bridge       string // the -i bridge it names (leftover listing and orphan detection)
	args         []string
}

func (r hostRule) String() string {
	if r.table == tableNAT {
		return "iptables nat " + r.chain + " DNAT rule for " + r.bridge
	}
	return "iptables " + r.chain + " rule for " + r.bridge
}

// addHostRules lets traffic that enters and leaves the same lab bridge through, for every
// bridge, and adds the nat rules (natRules) in one iptables-restore (one process, one commit,
// instead of one per rule).
// Equivalent to: iptables -I DOCKER-USER -i BR -o BR -m comment --comment "sfclab lab=LAB" -j ACCEPT
// for each internal BR, and iptables -t nat -I PREROUTING RULE for each nat rule
func addHostRules(ctx context.Context, bridges []string, nat [][]string, lab string) error {
	var rules []hostRule
	for _, br := range bridges {
		rules = append(rules, hostRule{table: tableFilter, chain: UserChain, bridge: br, args: bridgeRule(br, lab)})
	}
	for _, a := range nat {
		rules = append(rules, hostRule{table: tableNAT, chain: PreroutingChain, args: a})
	}
	if err := restoreRules(ctx, "-I", rules); err != nil {
		return fmt.Errorf("add host rules of lab %s (bridges %s): %w", lab, strings.Join(bridges, ", "), err)
	}
	return nil
}

// restoreRules inserts (op "-I") or deletes (op "-D") rules in one iptables-restore --noflush;
// nothing else in the tables changes.
func restoreRules(ctx context.Context, op string, rules []hostRule) error {
	if len(rules) == 0 {
		return nil
	}
	cmd := exec.CommandContext(ctx, "iptables-restore", "-w", "--noflush")
	cmd.Stdin = strings.NewReader(restoreInput(op, rules))
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("run iptables-restore --noflush (%d rules %s): %w: %s", len(rules), op, err, strings.TrimSpace(errb.String()))
	}
	return nil
}

// restoreInput is the iptables-restore input that applies op to rules, table by table (filter
// first, then nat).
func restoreInput(op string, rules []hostRule) string {
	var in strings.Builder
	for _, table := range []string{tableFilter, tableNAT} {
		n := 0
		for _, r := range rules {
			if r.table != table {
				continue
			}
			if n == 0 {
				in.WriteString("*" + table + "\n")
			}
			n++
			in.WriteString(op + " " + r.chain)
			for _, a := range r.args {
				in.WriteString(" " + restoreQuote(a))
			}
			in.WriteString("\n")
		}
		if n > 0 {
			in.WriteString("COMMIT\n")
		}
	}
	return in.String()
}

// restoreQuote quotes a word for iptables-restore when it holds a space or a quote.
func restoreQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\"\\'") {
		return s
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// taggedRules lists the rules of one host chain carrying a comment "sfclab lab=..." for which
// keep(lab) is true.
// Equivalent to: iptables -t TABLE -S CHAIN | grep 'sfclab lab='
func taggedRules(ctx context.Context, table, chain string, keep func(lab string) bool) ([]hostRule, error) {
	if _, err := exec.LookPath("iptables"); err != nil {
		return nil, nil
	}
	out, err := iptables(ctx, "-t", table, "-S", chain)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		// No such chain: the engine does not manage iptables, and sfclab added no rules.
		return nil, nil
	}
	var rules []hostRule
	for _, line := range strings.Split(out, "\n") {
		f, err := splitQuoted(line)
		if err != nil || len(f) < 2 || f[0] != "-A" || f[1] != chain {
			continue
		}
		args := f[2:]
		r := hostRule{table: table, chain: chain}
		tagged := false
		for i := 0; i+1 < len(args); i++ {
			switch args[i] {
			case "-i":
				r.bridge = args[i+1]
			case "--comment":
				if lab, ok := strings.CutPrefix(args[i+1], ruleComment("")); ok && keep(lab) {
					tagged = true
				}
			}
		}
		if tagged {
			r.args = args
			rules = append(rules, r)
		}
	}
	return rules, nil
}

// hostRules lists every host rule of the labs keep selects: DOCKER-USER, then nat PREROUTING.
func hostRules(ctx context.Context, keep func(lab string) bool) ([]hostRule, error) {
	var all []hostRule
	for _, c := range [][2]string{{tableFilter, UserChain}, {tableNAT, PreroutingChain}} {
		rules, err := taggedRules(ctx, c[0], c[1], keep)
		if err != nil {
			return all, err
		}
		all = append(all, rules...)
	}
	return all, nil
}

// labRules lists the host rules tagged with the lab's comment.
// Equivalent to: iptables -S DOCKER-USER; iptables -t nat -S PREROUTING | grep 'sfclab lab=LAB'
func labRules(ctx context.Context, lab string) ([]hostRule, error) {
	return hostRules(ctx, func(l string) bool { return l == lab })
}

// dropLabRules removes every host rule of a lab (DOCKER-USER and nat), in one iptables-restore.
func dropLabRules(ctx context.Context, lab string) error {
	rules, err := labRules(ctx, lab)
	if err != nil {
		return err
	}
	if err := restoreRules(ctx, "-D", rules); err != nil {
		return fmt.Errorf("delete host iptables rules of lab %s: %w", lab, err)
	}
	return nil
}

// orphanLabs lists the labs that have host rules naming a bridge that no longer exists: what
// a crash (kill -9) between the removal of a lab's networks and of its rules leaves, which no
// container or network label can find any more.
func orphanLabs(ctx context.Context) []string {
	rules, _ := hostRules(ctx, func(string) bool { return true })
	var labs []string
	for _, r := range rules {
		if r.bridge == "" {
			continue
		}
		if _, err := os.Stat("/sys/class/net/" + r.bridge); err == nil {
			continue
		}
		for i := 0; i+1 < len(r.args); i++ {
			if lab, ok := strings.CutPrefix(r.args[i+1], ruleComment("")); ok && r.args[i] == "--comment" {
				labs = append(labs, lab)
			}
		}
	}
	return labs
}

// splitQuoted splits an `iptables -S` line into words; double quotes group (iptables quotes
// comments with spaces and escapes inner quotes with a backslash).
func splitQuoted(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	inWord, inQuote := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inQuote && c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
		case c == '"':
			inQuote = !inQuote
			inWord = true
		case !inQuote && (c == ' ' || c == '\t'):
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inQuote {
		return nil, fmt.Errorf("split %q: unterminated quote", s)
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out, nil
}

// natRule is the nat PREROUTING rule that DNATs the source's connections to a published
// port (on its network's bridge) to the target container's own address.
func natRule(bridge string, pub plan.Publish, target netip.Addr, lab string) []string {
	return []string{"-i", bridge, "-d", pub.HostIP.String() + "/32", "-p", pub.Protocol, "-m", pub.Protocol,
		"--dport", strconv.Itoa(int(pub.HostPort)), "-m", "comment", "--comment", ruleComment(lab),
		"-j", "DNAT", "--to-destination", netip.AddrPortFrom(target, pub.Port).String()}
}

// natRules are the nat rules of a plan's published ports; bridges maps a segment's name to
// its network's host bridge.
func natRules(p *plan.Plan, bridges map[string]string) ([][]string, error) {
	var out [][]string
	for _, pub := range p.Publish {
		var seg *plan.Segment
		for _, s := range p.Segments {
			if s.Gateway == pub.HostIP {
				seg = s
			}
		}
		n := p.Node(pub.Node)
		if seg == nil || n == nil {
			return nil, fmt.Errorf("publish %s:%d: no segment with that gateway or no node %q", pub.HostIP, pub.HostPort, pub.Node)
		}
		var target netip.Addr
		for _, ifc := range n.Interfaces {
			if ifc.Segment == seg.Name {
				target = ifc.Address.Addr()
			}
		}
		br := bridges[seg.Name]
		if !target.IsValid() || br == "" {
			return nil, fmt.Errorf("publish %s:%d: node %s has no interface on segment %s, or its network no bridge", pub.HostIP, pub.HostPort, pub.Node, seg.Name)
		}
		out = append(out, natRule(br, pub, target, p.Lab))
	}
	return out, nil
}
