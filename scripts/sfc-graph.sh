#!/bin/bash
# sfc-graph.sh: build, list, update and delete a service graph of two chains with the OpenStack
# client (`openstack sfc ...`), against any networking-sfc endpoint: `sfclab serve` or the real
# networking-sfc server. It needs the Neutron ports client-eth0, server-eth0, f1-ingress,
# f1-egress, f2-ingress and f2-egress (f1's two ports on one device, f2's on another), e.g.
# a lab with functions f1 and f2 between a client and a server:
#
#   export OS_AUTH_TYPE=none OS_ENDPOINT=http://127.0.0.1:9696
#   scripts/sfc-graph.sh
#
# Debian's python-neutronclient 8.1.0 cannot show, set or delete a service graph ('Client'
# object has no attribute 'list_service_graphs', before any request is sent): the script shows
# that failure, then does the same with `sfclab chain graph show|set|delete` (set SFCLAB to
# the sfclab to run; default: sfclab on PATH).
#
# Every command is echoed after "$ ", followed by its output (stdout, then stderr) and its exit
# status, so that two runs compare line by line once ids and timestamps are masked
# (internal/cli's TestGraphScript runs it against both servers and compares). Lists are
# sorted by name: the two servers list in different orders.
set -u
SFCLAB=${SFCLAB:-sfclab}

run() {
	printf '$'
	printf ' %q' "$@"
	echo
	local out err rc
	err=$(mktemp)
	out=$("$@" 2>"$err")
	rc=$?
	[ -n "$out" ] && echo "$out"
	[ -s "$err" ] && cat "$err"
	rm -f "$err"
	echo "exit $rc"
}
sfc() { run openstack sfc "$@"; }
graph() { run "$SFCLAB" chain graph "$@"; }

# Build: two hops that carry the chains' correlation (a graph branches only there), a chain
# from the client through f1 and one through f2, and a graph that sends what leaves the first
# chain into the second.
sfc port pair create --ingress f1-ingress --egress f1-egress \
	--service-function-parameters correlation=mpls,weight=1 -f json pp1
sfc port pair create --ingress f2-ingress --egress f2-egress \
	--service-function-parameters correlation=mpls,weight=2 -f json pp2
sfc port pair group create --port-pair pp1 -f json ppg1
sfc port pair group create --port-pair pp2 --description "second hop" -f json ppg2
sfc flow classifier create --protocol udp --destination-port 5000:5000 \
	--logical-source-port client-eth0 -f json fc1
sfc flow classifier create --protocol udp --destination-port 5001:5001 --source-ip-prefix 198.18.0.0/24 \
	--logical-source-port server-eth0 -f json fc2
sfc port chain create --port-pair-group ppg1 --flow-classifier fc1 -f json pc1
sfc port chain create --port-pair-group ppg2 --flow-classifier fc2 --chain-parameters correlation=mpls -f json pc2
sfc service graph create --branching-point pc1:pc2 --description "pc1 then pc2" -f json sg1

# List.
sfc port pair list --sort-column Name -f json
sfc port pair group list --sort-column Name -f json
sfc flow classifier list --sort-column Name --long -f json
sfc port chain list --sort-column Name --long -f json
sfc service graph list --sort-column Name --long -f json
sfc service graph show -f json sg1
graph show -f json sg1

# Update, and what a chain in a graph refuses.
sfc port pair set --description "first hop" pp1
sfc port pair group set --description "the second hop" ppg2
sfc port chain set --description "through f1" pc1
sfc port chain set --port-pair-group ppg2 pc1
sfc service graph set --name sg1-renamed sg1
graph set --name sg1-renamed --description "pc1, then pc2" sg1
graph show -f json sg1-renamed
sfc port chain show -f json pc1

# Delete: what is in use first (refused), then the graph and everything in reverse order.
sfc port pair group delete ppg1
sfc port chain delete pc1
sfc service graph delete sg1-renamed
graph delete sg1-renamed
graph show sg1-renamed
sfc port chain delete pc1
sfc port chain delete pc2
sfc port pair group delete ppg1
sfc port pair group delete ppg2
sfc port pair delete pp1
sfc port pair delete pp2
sfc flow classifier delete fc1
sfc flow classifier delete fc2
sfc service graph list -f json
