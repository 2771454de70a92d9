package docker

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
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

// UserChain is the engine's chain for its users' own forwarding rules.
const UserChain = "DOCKER-USER"

// ruleComment tags a lab's DOCKER-USER rules.
func ruleComment(lab string) string { return "sfclab lab=" + lab }

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

// acceptBridges lets traffic that enters and leaves the same lab bridge through, for every
// bridge in one iptables-restore (one process, one commit, instead of one per bridge).
// Equivalent to: iptables -I DOCKER-USER -i BR -o BR -m comment --comment "sfclab lab=LAB" -j ACCEPT
// for each BR
func acceptBridges(ctx context.Context, bridges []string, lab string) error {
	rules := make([][]string, len(bridges))
	for i, br := range bridges {
		rules[i] = bridgeRule(br, lab)
	}
	if err := restoreUserRules(ctx, "-I", rules); err != nil {
		return fmt.Errorf("accept lab traffic on bridges %s: %w", strings.Join(bridges, ", "), err)
	}
	return nil
}

// restoreUserRules inserts (op "-I") or deletes (op "-D") rules of DOCKER-USER in one
// iptables-restore --noflush; nothing else in the table changes.
func restoreUserRules(ctx context.Context, op string, rules [][]string) error {
	if len(rules) == 0 {
		return nil
	}
	cmd := exec.CommandContext(ctx, "iptables-restore", "-w", "--noflush")
	cmd.Stdin = strings.NewReader(restoreInput(op, rules))
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("run iptables-restore --noflush (%d rules %s %s): %w: %s", len(rules), op, UserChain, err, strings.TrimSpace(errb.String()))
	}
	return nil
}

// restoreInput is the iptables-restore input that applies op to rules in DOCKER-USER.
func restoreInput(op string, rules [][]string) string {
	var in strings.Builder
	in.WriteString("*filter\n")
	for _, r := range rules {
		in.WriteString(op + " " + UserChain)
		for _, a := range r {
			in.WriteString(" " + restoreQuote(a))
		}
		in.WriteString("\n")
	}
	in.WriteString("COMMIT\n")
	return in.String()
}

// restoreQuote quotes a word for iptables-restore when it holds a space or a quote.
func restoreQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\"\\'") {
		return s
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

type userRule struct {
	bridge string
	args   []string // as `iptables -S` prints them, after "-A DOCKER-USER"
}

func (r userRule) String() string { return "iptables " + UserChain + " rule for " + r.bridge }

// labRules lists the DOCKER-USER rules tagged with the lab's comment.
// Equivalent to: iptables -S DOCKER-USER | grep 'sfclab lab=LAB'
func labRules(ctx context.Context, lab string) ([]userRule, error) {
	if _, err := exec.LookPath("iptables"); err != nil {
		return nil, nil
	}
	out, err := iptables(ctx, "-S", UserChain)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		// No such chain: the engine does not manage iptables, and sfclab added no rules.
		return nil, nil
	}
	var rules []userRule
	for _, line := range strings.Split(out, "\n") {
		f, err := splitQuoted(line)
		if err != nil || len(f) < 2 || f[0] != "-A" || f[1] != UserChain {
			continue
		}
		args := f[2:]
		var r userRule
		tagged := false
		for i := 0; i+1 < len(args); i++ {
			switch args[i] {
			case "-i":
				r.bridge = args[i+1]
			case "--comment":
				tagged = args[i+1] == ruleComment(lab)
			}
		}
		if tagged {
			r.args = args
			rules = append(rules, r)
		}
	}
	return rules, nil
}

// dropLabRules removes every DOCKER-USER rule of a lab, in one iptables-restore.
func dropLabRules(ctx context.Context, lab string) error {
	rules, err := labRules(ctx, lab)
	if err != nil {
		return err
	}
	args := make([][]string, len(rules))
	for i, r := range rules {
		args[i] = r.args
	}
	if err := restoreUserRules(ctx, "-D", args); err != nil {
		return fmt.Errorf("delete DOCKER-USER rules of lab %s: %w", lab, err)
	}
	return nil
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
