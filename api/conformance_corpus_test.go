package api

import (
	"fmt"
	"strings"
)

// conformanceCorpus is the requests TestConformance replays against both servers, in order:
// every resource's create, show, list (filters, fields, paging, sorting), update and delete;
// networking-sfc's validation rules (API definitions and DB layer); conflicts and in-use
// errors; the service graph rules. Ports are the fixture lab's (client, server, f1-f3).
func conformanceCorpus() []step {
	var c []step
	add := func(s ...step) { c = append(c, s...) }
	post := func(name, plural, singular, body, save string) step {
		return step{name: name, method: "POST", path: "/v2.0/sfc/" + plural, body: fmt.Sprintf(`{"%s": %s}`, singular, body), save: save}
	}
	put := func(name, plural, singular, label, body string) step {
		return step{name: name, method: "PUT", path: "/v2.0/sfc/" + plural + "/{{" + label + "}}", body: fmt.Sprintf(`{"%s": %s}`, singular, body)}
	}
	get := func(name, path string) step { return step{name: name, method: "GET", path: path} }
	del := func(name, plural, label string) step {
		return step{name: name, method: "DELETE", path: "/v2.0/sfc/" + plural + "/{{" + label + "}}"}
	}
	unknown := "8f2b3a4c-1d2e-4f50-8a6b-7c8d9e0f1a2b"
	fc := func(name, body, save string) step {
		return post(name, "flow_classifiers", "flow_classifier", body, save)
	}
	pp := func(name, body, save string) step { return post(name, "port_pairs", "port_pair", body, save) }
	ppg := func(name, body, save string) step {
		return post(name, "port_pair_groups", "port_pair_group", body, save)
	}
	pc := func(name, body, save string) step { return post(name, "port_chains", "port_chain", body, save) }
	sg := func(name, body, save string) step { return post(name, "service_graphs", "service_graph", body, save) }
	lsp := `"logical_source_port": "{{port:client-eth0}}"`

	// Flow classifiers: create and its validation rules. A classifier without a logical
	// source port conflicts with every other one whose header fields overlap, so the one
	// networking-sfc accepts goes first and is deleted at once.
	add(
		fc("fc no logical source port", `{"name": "fc-nolsp", "protocol": "tcp", "destination_port_range_min": 12, "destination_port_range_max": 12}`, "fcnolsp"),
		step{name: "sync: delete fc-nolsp", method: "DELETE", path: "/v2.0/sfc/flow_classifiers/{{fcnolsp}}", sync: true},
		fc("fc create minimal", `{"name": "fc1", "logical_source_port": "{{port:f3-egress}}"}`, "fc1"),
		fc("fc create full", `{"name": "fc2", "description": "web", "ethertype": "IPv4", "protocol": "tcp",
			"source_ip_prefix": "198.18.0.0/24", "destination_ip_prefix": "198.18.1.0/24",
			"source_port_range_min": 1000, "source_port_range_max": 2000,
			"destination_port_range_min": 80, "destination_port_range_max": 80,
			`+lsp+`, "logical_destination_port": "{{port:server-eth0}}", "l7_parameters": {}}`, "fc2"),
		fc("fc create udp", `{"name": "fc3", "protocol": "udp", "destination_port_range_min": 53, "destination_port_range_max": 53, `+lsp+`}`, "fc3"),
		fc("fc create icmp", `{"name": "fc4", "protocol": "icmp", "destination_ip_prefix": "198.18.2.0/24", `+lsp+`}`, "fc4"),
		fc("fc create ipv6", `{"name": "fc5", "ethertype": "IPv6", "protocol": "tcp", "source_ip_prefix": "2001:2::/64", `+lsp+`}`, "fc5"),
		fc("fc prefix with host bits", `{"name": "fc6", "protocol": "tcp", "source_ip_prefix": "198.18.3.5/24", "logical_source_port": "{{port:f2-egress}}"}`, "fc6"),
		fc("fc port range one-sided min", `{"name": "fc7", "protocol": "tcp", "destination_port_range_min": 8000, `+lsp+`}`, "fc7"),
		fc("fc port range one-sided max", `{"name": "fc8", "protocol": "udp", "source_port_range_max": 9000, `+lsp+`}`, "fc8"),
		fc("fc port zero", `{"name": "fc9", "protocol": "tcp", "destination_port_range_min": 0, "destination_port_range_max": 0, "source_ip_prefix": "198.18.9.0/24", `+lsp+`}`, "fc9"),
		fc("fc numeric strings", `{"name": "fc10", "protocol": "tcp", "destination_port_range_min": "7000", "destination_port_range_max": "7001", `+lsp+`}`, "fc10"),
		fc("fc for a symmetric chain", `{"name": "fc13", "protocol": "udp", "destination_port_range_min": 5353, "destination_port_range_max": 5353, `+lsp+`}`, "fc13"),
		fc("fc for an update", `{"name": "fc14", "protocol": "udp", "destination_port_range_min": 6000, "destination_port_range_max": 6000, `+lsp+`}`, "fc14"),
		fc("fc same header as fc2 other destination port", `{"name": "fc12", "protocol": "tcp", "destination_port_range_min": 80, "destination_port_range_max": 80,
			"source_ip_prefix": "198.18.0.0/24", "destination_ip_prefix": "198.18.1.0/24", `+lsp+`, "logical_destination_port": "{{port:f1-ingress}}"}`, "fc12"),
		fc("fc same header as fc2 other source port", `{"name": "fc15", "protocol": "tcp", "destination_port_range_min": 80, "destination_port_range_max": 80,
			"source_ip_prefix": "198.18.0.0/24", "destination_ip_prefix": "198.18.1.0/24", "logical_source_port": "{{port:f1-egress}}"}`, "fc15"),
		fc("fc lsp equals ldp", `{"name": "fc11", "protocol": "tcp", "destination_port_range_min": 11, "destination_port_range_max": 11,
			"logical_source_port": "{{port:f1-ingress}}", "logical_destination_port": "{{port:f1-ingress}}"}`, "fc11"),
		fc("fc conflict with fc1", `{"name": "dup", "logical_source_port": "{{port:f3-egress}}"}`, ""),
		fc("fc conflict with fc2", `{"name": "dup2", "protocol": "tcp", "destination_port_range_min": 80, "destination_port_range_max": 80,
			"source_ip_prefix": "198.18.0.0/24", "destination_ip_prefix": "198.18.1.0/24", "source_port_range_min": 1000, "source_port_range_max": 2000,
			`+lsp+`, "logical_destination_port": "{{port:server-eth0}}"}`, ""),
	)
	for i, p := range []string{"gre", "TCP", "6", "", "null", "1"} {
		body := `{"protocol": "` + p + `", ` + lsp + `, "destination_ip_prefix": "198.18.40.` + fmt.Sprint(i) + `/32"}`
		if p == "null" || p == "1" {
			body = `{"protocol": ` + p + `, ` + lsp + `, "destination_ip_prefix": "198.18.40.` + fmt.Sprint(i) + `/32"}`
		}
		add(fc("fc protocol "+p, body, ""))
	}
	for i, e := range []string{"IPv5", "ipv6", "ipv4", "4"} {
		add(fc("fc ethertype "+e, `{"ethertype": "`+e+`", "protocol": "tcp", "source_port_range_min": `+fmt.Sprint(4000+i)+`, "source_port_range_max": `+fmt.Sprint(4000+i)+`, `+lsp+`}`, ""))
	}
	for _, r := range []struct{ name, body string }{
		{"min above max", `"destination_port_range_min": 90, "destination_port_range_max": 80`},
		{"port 65536", `"destination_port_range_min": 65536`},
		{"port -1", `"source_port_range_max": -1`},
		{"port text", `"source_port_range_min": "http"`},
		{"port float", `"source_port_range_min": 80.5`},
		{"port bool", `"source_port_range_min": true`},
	} {
		add(fc("fc "+r.name, `{"protocol": "tcp", `+r.body+`, `+lsp+`}`, ""))
	}
	add(
		fc("fc ports without protocol", `{"destination_port_range_min": 22, "destination_port_range_max": 22, `+lsp+`}`, ""),
		fc("fc ports with icmp", `{"protocol": "icmp", "destination_port_range_min": 22, `+lsp+`}`, ""),
		fc("fc ipv6 prefix on ipv4", `{"protocol": "tcp", "source_ip_prefix": "2001:2::/64", `+lsp+`}`, ""),
		fc("fc ipv4 prefix on ipv6", `{"ethertype": "IPv6", "destination_ip_prefix": "198.18.0.0/16", `+lsp+`}`, ""),
		fc("fc prefix not a prefix", `{"protocol": "tcp", "source_ip_prefix": "not-an-ip", `+lsp+`}`, ""),
		fc("fc prefix address only", `{"protocol": "tcp", "source_ip_prefix": "198.18.7.7", `+lsp+`}`, ""),
		fc("fc prefix bad length", `{"protocol": "tcp", "source_ip_prefix": "198.18.7.0/33", `+lsp+`}`, ""),
		fc("fc lsp not a uuid", `{"logical_source_port": "client-eth0"}`, ""),
		fc("fc lsp unknown", `{"logical_source_port": "`+unknown+`"}`, ""),
		fc("fc ldp unknown", `{"protocol": "udp", `+lsp+`, "logical_destination_port": "`+unknown+`"}`, ""),
		fc("fc l7 parameters", `{"protocol": "udp", "l7_parameters": {"url": "/x"}, `+lsp+`}`, ""),
		fc("fc l7 parameters not a dict", `{"protocol": "udp", "l7_parameters": [1], `+lsp+`}`, ""),
		fc("fc unknown attribute", `{"colour": "red", `+lsp+`}`, ""),
		fc("fc id not allowed", `{"id": "`+unknown+`", `+lsp+`}`, ""),
		fc("fc name too long", `{"name": "`+strings.Repeat("n", 256)+`", `+lsp+`}`, ""),
		fc("fc name not a string", `{"name": 5, `+lsp+`}`, ""),
		fc("fc description too long", `{"description": "`+strings.Repeat("d", 256)+`", `+lsp+`}`, ""),
		step{name: "fc malformed json", method: "POST", path: "/v2.0/sfc/flow_classifiers", body: `{"flow_classifier": {`},
		step{name: "fc wrong resource key", method: "POST", path: "/v2.0/sfc/flow_classifiers", body: `{"port_pair": {}}`},
		step{name: "fc body not an object", method: "POST", path: "/v2.0/sfc/flow_classifiers", body: `{"flow_classifier": [1]}`},
		step{name: "fc empty body", method: "POST", path: "/v2.0/sfc/flow_classifiers", body: ``},
	)
	// Flow classifiers: show, list, update.
	add(
		get("fc show", "/v2.0/sfc/flow_classifiers/{{fc2}}"),
		get("fc show fields", "/v2.0/sfc/flow_classifiers/{{fc2}}?fields=name&fields=protocol"),
		get("fc show unknown", "/v2.0/sfc/flow_classifiers/"+unknown),
		get("fc show not a uuid", "/v2.0/sfc/flow_classifiers/nope"),
		step{name: "fc list", method: "GET", path: "/v2.0/sfc/flow_classifiers", unordered: true},
		step{name: "fc list filter name", method: "GET", path: "/v2.0/sfc/flow_classifiers?name=fc3", unordered: true},
		step{name: "fc list filter protocol", method: "GET", path: "/v2.0/sfc/flow_classifiers?protocol=tcp&fields=name", unordered: true},
		step{name: "fc list filter two names", method: "GET", path: "/v2.0/sfc/flow_classifiers?name=fc1&name=fc4&fields=name&fields=id", unordered: true},
		step{name: "fc list filter id", method: "GET", path: "/v2.0/sfc/flow_classifiers?id={{fc3}}", unordered: true},
		step{name: "fc list filter unknown attribute", method: "GET", path: "/v2.0/sfc/flow_classifiers?colour=red&fields=name", unordered: true},
		step{name: "fc list filter port range", method: "GET", path: "/v2.0/sfc/flow_classifiers?destination_port_range_min=53&fields=name", unordered: true},
		get("fc list sort key", "/v2.0/sfc/flow_classifiers?sort_key=name&sort_dir=asc&fields=name"),
		get("fc list sort key id", "/v2.0/sfc/flow_classifiers?sort_key=id&sort_dir=desc&fields=name"),
		step{name: "fc list page 1", method: "GET", path: "/v2.0/sfc/flow_classifiers?limit=3&fields=name&fields=id", page: true, saveLast: "last:fcpage1"},
		step{name: "fc list page 2", method: "GET", path: "/v2.0/sfc/flow_classifiers?limit=3&marker={{last:fcpage1}}&fields=name&fields=id", page: true, saveLast: "last:fcpage2"},
		step{name: "fc list page 3", method: "GET", path: "/v2.0/sfc/flow_classifiers?limit=3&marker={{last:fcpage2}}", page: true, saveLast: "last:fcpage3"},
		step{name: "fc list page after last", method: "GET", path: "/v2.0/sfc/flow_classifiers?limit=3&marker={{last:fcpage3}}", page: true},
		step{name: "fc list page reverse", method: "GET", path: "/v2.0/sfc/flow_classifiers?limit=2&marker={{last:fcpage1}}&page_reverse=true&fields=name", page: true},
		step{name: "fc list limit 0", method: "GET", path: "/v2.0/sfc/flow_classifiers?limit=0&fields=name", unordered: true},
		step{name: "fc list limit large", method: "GET", path: "/v2.0/sfc/flow_classifiers?limit=100&fields=name", page: true},
		step{name: "fc list page filtered", method: "GET", path: "/v2.0/sfc/flow_classifiers?limit=1&protocol=udp", page: true},
		get("fc list limit negative", "/v2.0/sfc/flow_classifiers?limit=-1"),
		get("fc list limit text", "/v2.0/sfc/flow_classifiers?limit=ten"),
		get("fc list marker unknown", "/v2.0/sfc/flow_classifiers?limit=2&marker="+unknown),
		get("fc list sort key unknown", "/v2.0/sfc/flow_classifiers?sort_key=colour&sort_dir=asc"),
		get("fc list sort dir without key", "/v2.0/sfc/flow_classifiers?sort_dir=asc"),
		get("fc list sort dir bad", "/v2.0/sfc/flow_classifiers?sort_key=name&sort_dir=up"),
		put("fc update name", "flow_classifiers", "flow_classifier", "fc3", `{"name": "fc3-dns", "description": "dns"}`),
		put("fc update protocol", "flow_classifiers", "flow_classifier", "fc3", `{"protocol": "tcp"}`),
		put("fc update id", "flow_classifiers", "flow_classifier", "fc3", `{"id": "`+unknown+`"}`),
		put("fc update tenant", "flow_classifiers", "flow_classifier", "fc3", `{"tenant_id": "x"}`),
		step{name: "fc update unknown", method: "PUT", path: "/v2.0/sfc/flow_classifiers/" + unknown, body: `{"flow_classifier": {"name": "x"}}`},
		step{name: "fc delete unknown", method: "DELETE", path: "/v2.0/sfc/flow_classifiers/" + unknown},
		del("fc delete fc10", "flow_classifiers", "fc10"),
		get("fc show deleted", "/v2.0/sfc/flow_classifiers/{{fc10}}"),
	)

	// Port pairs.
	pair := func(f string) string {
		return `"ingress": "{{port:` + f + `-ingress}}", "egress": "{{port:` + f + `-egress}}"`
	}
	add(
		pp("pp create", `{"name": "pp1", `+pair("f1")+`}`, "pp1"),
		pp("pp create with parameters", `{"name": "pp2", "description": "second", `+pair("f2")+`, "service_function_parameters": {"correlation": null, "weight": 3}}`, "pp2"),
		pp("pp create weight 0", `{"name": "pp3", `+pair("f3")+`, "service_function_parameters": {"correlation": null, "weight": 0}}`, "pp3"),
		pp("pp create weight 100", `{"name": "pp4", "ingress": "{{port:f3-egress}}", "egress": "{{port:f3-ingress}}", "service_function_parameters": {"correlation": null, "weight": 100}}`, "pp4"),
		pp("pp create nsh", `{"name": "pp5", "ingress": "{{port:f2-egress}}", "egress": "{{port:f2-ingress}}", "service_function_parameters": {"correlation": "nsh", "weight": 1}}`, "pp5"),
		pp("pp create mpls", `{"name": "pp6", "ingress": "{{port:f1-egress}}", "egress": "{{port:f1-ingress}}", "service_function_parameters": {"correlation": "mpls", "weight": 1}}`, "pp6"),
		pp("pp parameters weight only", `{"name": "pp-w", "ingress": "{{port:f3-ingress}}", "egress": "{{port:f3-ingress}}", "service_function_parameters": {"weight": 7}}`, "ppw"),
		pp("pp parameters correlation only", `{"name": "pp-c", "ingress": "{{port:f3-egress}}", "egress": "{{port:f3-egress}}", "service_function_parameters": {"correlation": "mpls"}}`, "ppc"),
		step{name: "sync: delete pp-w", method: "DELETE", path: "/v2.0/sfc/port_pairs/{{ppw}}", sync: true},
		step{name: "sync: delete pp-c", method: "DELETE", path: "/v2.0/sfc/port_pairs/{{ppc}}", sync: true},
		pp("pp same ports again", `{`+pair("f1")+`}`, ""),
		pp("pp ports of two nodes", `{"ingress": "{{port:f1-ingress}}", "egress": "{{port:f2-egress}}"}`, ""),
		pp("pp ingress equals egress", `{"ingress": "{{port:f1-ingress}}", "egress": "{{port:f1-ingress}}"}`, "pp7"),
		pp("pp ingress unknown", `{"ingress": "`+unknown+`", "egress": "{{port:f1-egress}}"}`, ""),
		pp("pp egress unknown", `{"ingress": "{{port:f1-ingress}}", "egress": "`+unknown+`"}`, ""),
		pp("pp ingress not a uuid", `{"ingress": "f1-ingress", "egress": "{{port:f1-egress}}"}`, ""),
		pp("pp missing egress", `{"ingress": "{{port:f1-ingress}}"}`, ""),
		pp("pp correlation bad", `{"ingress": "{{port:f1-ingress}}", "egress": "{{port:f3-egress}}", "service_function_parameters": {"correlation": "vxlan"}}`, ""),
		pp("pp weight negative", `{`+pair("f2")+`, "service_function_parameters": {"weight": -1}}`, ""),
		pp("pp weight text", `{`+pair("f2")+`, "service_function_parameters": {"weight": "heavy"}}`, ""),
		pp("pp parameters unknown key", `{`+pair("f2")+`, "service_function_parameters": {"colour": "red"}}`, ""),
		pp("pp parameters not a dict", `{`+pair("f2")+`, "service_function_parameters": "weight"}`, ""),
		pp("pp unknown attribute", `{`+pair("f2")+`, "host": "x"}`, ""),
		get("pp show", "/v2.0/sfc/port_pairs/{{pp2}}"),
		get("pp show fields", "/v2.0/sfc/port_pairs/{{pp2}}?fields=service_function_parameters"),
		get("pp show unknown", "/v2.0/sfc/port_pairs/"+unknown),
		step{name: "pp list", method: "GET", path: "/v2.0/sfc/port_pairs", unordered: true},
		step{name: "pp list filter ingress", method: "GET", path: "/v2.0/sfc/port_pairs?ingress={{port:f2-ingress}}", unordered: true},
		get("pp list sorted", "/v2.0/sfc/port_pairs?sort_key=name&sort_dir=desc&fields=name"),
		step{name: "pp list page 1", method: "GET", path: "/v2.0/sfc/port_pairs?limit=4&fields=name&fields=id", page: true, saveLast: "last:pppage1"},
		step{name: "pp list page 2", method: "GET", path: "/v2.0/sfc/port_pairs?limit=4&marker={{last:pppage1}}&fields=name", page: true},
		put("pp update name", "port_pairs", "port_pair", "pp2", `{"name": "pp2-renamed", "description": ""}`),
		put("pp update ingress", "port_pairs", "port_pair", "pp2", `{"ingress": "{{port:f3-ingress}}"}`),
		put("pp update parameters", "port_pairs", "port_pair", "pp2", `{"service_function_parameters": {"weight": 2}}`),
		step{name: "pp delete unknown", method: "DELETE", path: "/v2.0/sfc/port_pairs/" + unknown},
	)

	// Port pair groups.
	add(
		ppg("ppg create", `{"name": "ppg1", "port_pairs": ["{{pp1}}"]}`, "ppg1"),
		ppg("ppg create with parameters", `{"name": "ppg2", "port_pairs": ["{{pp2}}"], "port_pair_group_parameters": {"lb_fields": ["ip_src", "ip_dst"]}}`, "ppg2"),
		ppg("ppg create tap", `{"name": "ppg3", "port_pairs": ["{{pp3}}"], "tap_enabled": true}`, "ppg3"),
		ppg("ppg n-tuple mapping", `{"name": "ppg-nt", "port_pairs": ["{{pp4}}"], "port_pair_group_parameters": {"ppg_n_tuple_mapping": {"ingress_n_tuple": {"source_ip_prefix": "198.18.0.0/24"}, "egress_n_tuple": {}}}}`, "ppgnt"),
		step{name: "sync: delete ppg-nt", method: "DELETE", path: "/v2.0/sfc/port_pair_groups/{{ppgnt}}", sync: true},
		ppg("ppg create empty n-tuple mapping", `{"name": "ppg4", "port_pairs": ["{{pp4}}"], "port_pair_group_parameters": {"ppg_n_tuple_mapping": {"ingress_n_tuple": {}, "egress_n_tuple": {}}}}`, "ppg4"),
		ppg("ppg create nsh", `{"name": "ppg5", "port_pairs": ["{{pp5}}"]}`, "ppg5"),
		ppg("ppg create mpls", `{"name": "ppg6", "port_pairs": ["{{pp6}}"]}`, "ppg6"),
		ppg("ppg pair in another group", `{"port_pairs": ["{{pp1}}"]}`, ""),
		ppg("ppg no pairs", `{"name": "empty", "port_pairs": []}`, "ppgempty"),
		step{name: "sync: delete empty", method: "DELETE", path: "/v2.0/sfc/port_pair_groups/{{ppgempty}}", sync: true},
		ppg("ppg pair unknown", `{"port_pairs": ["`+unknown+`"]}`, ""),
		ppg("ppg pair not a uuid", `{"port_pairs": ["pp1"]}`, ""),
		ppg("ppg pair twice", `{"port_pairs": ["{{pp7}}", "{{pp7}}"]}`, ""),
		ppg("ppg inconsistent correlations", `{"port_pairs": ["{{pp5}}", "{{pp6}}"]}`, ""),
		ppg("ppg tap with two pairs", `{"port_pairs": ["{{pp7}}", "{{pp4}}"], "tap_enabled": true}`, ""),
		ppg("ppg lb_fields bad", `{"port_pairs": ["{{pp7}}"], "port_pair_group_parameters": {"lb_fields": ["ip_proto"]}}`, ""),
		ppg("ppg parameters unknown key", `{"port_pairs": ["{{pp7}}"], "port_pair_group_parameters": {"colour": 1}}`, ""),
		ppg("ppg n-tuple unknown key", `{"port_pairs": ["{{pp7}}"], "port_pair_group_parameters": {"ppg_n_tuple_mapping": {"ingress_n_tuple": {"protocol": "tcp"}}}}`, ""),
		ppg("ppg n-tuple unknown side", `{"port_pairs": [], "port_pair_group_parameters": {"ppg_n_tuple_mapping": {"middle_n_tuple": {}}}}`, "ppgmid"),
		step{name: "sync: delete middle", method: "DELETE", path: "/v2.0/sfc/port_pair_groups/{{ppgmid}}", sync: true},
		ppg("ppg tap not a bool", `{"port_pairs": ["{{pp7}}"], "tap_enabled": "maybe"}`, ""),
		ppg("ppg group_id not allowed", `{"port_pairs": ["{{pp7}}"], "group_id": 9}`, ""),
		get("ppg show", "/v2.0/sfc/port_pair_groups/{{ppg2}}"),
		get("ppg show n-tuple", "/v2.0/sfc/port_pair_groups/{{ppg4}}?fields=port_pair_group_parameters"),
		get("ppg show unknown", "/v2.0/sfc/port_pair_groups/"+unknown),
		step{name: "ppg list", method: "GET", path: "/v2.0/sfc/port_pair_groups?fields=name&fields=group_id&fields=tap_enabled", unordered: true},
		step{name: "ppg list filter tap", method: "GET", path: "/v2.0/sfc/port_pair_groups?tap_enabled=True&fields=name", unordered: true},
		get("ppg list sorted by group_id", "/v2.0/sfc/port_pair_groups?sort_key=group_id&sort_dir=desc&fields=name"),
		put("ppg update name", "port_pair_groups", "port_pair_group", "ppg2", `{"name": "ppg2-lb", "description": "lb"}`),
		put("ppg update pairs", "port_pair_groups", "port_pair_group", "ppg1", `{"port_pairs": ["{{pp1}}", "{{pp7}}"]}`),
		put("ppg update pair in use", "port_pair_groups", "port_pair_group", "ppg2", `{"port_pairs": ["{{pp1}}"]}`),
		put("ppg update tap", "port_pair_groups", "port_pair_group", "ppg2", `{"tap_enabled": true}`),
		put("ppg update parameters", "port_pair_groups", "port_pair_group", "ppg2", `{"port_pair_group_parameters": {"lb_fields": []}}`),
		del("pp delete in group", "port_pairs", "pp2"),
	)

	// Port chains.
	add(
		pc("pc create", `{"name": "pc1", "port_pair_groups": ["{{ppg1}}", "{{ppg2}}"], "flow_classifiers": ["{{fc2}}"]}`, "pc1"),
		pc("pc create no classifier", `{"name": "pc2", "port_pair_groups": ["{{ppg2}}"]}`, "pc2"),
		pc("pc create chain_id", `{"name": "pc3", "port_pair_groups": ["{{ppg4}}"], "flow_classifiers": ["{{fc3}}"], "chain_id": 7}`, "pc3"),
		pc("pc chain_id taken", `{"port_pair_groups": ["{{ppg4}}", "{{ppg2}}"], "chain_id": 7}`, ""),
		pc("pc chain_id 20000", `{"name": "pc4", "port_pair_groups": ["{{ppg2}}", "{{ppg4}}"], "flow_classifiers": ["{{fc4}}"], "chain_id": 20000}`, "pc4"),
		pc("pc chain_id 70000", `{"port_pair_groups": ["{{ppg4}}", "{{ppg1}}"], "chain_id": 70000}`, ""),
		pc("pc chain_id negative", `{"port_pair_groups": ["{{ppg4}}", "{{ppg1}}"], "chain_id": -2}`, ""),
		pc("pc chain_id text", `{"port_pair_groups": ["{{ppg4}}", "{{ppg1}}"], "chain_id": "seven"}`, ""),
		pc("pc same groups as pc1", `{"port_pair_groups": ["{{ppg1}}", "{{ppg2}}"]}`, ""),
		pc("pc classifier in use", `{"port_pair_groups": ["{{ppg2}}", "{{ppg1}}"], "flow_classifiers": ["{{fc2}}"]}`, ""),
		pc("pc classifier conflicts", `{"port_pair_groups": ["{{ppg2}}", "{{ppg1}}"], "flow_classifiers": ["{{fc12}}"]}`, ""),
		pc("pc classifier overlaps on another source port", `{"name": "pc-other-lsp", "port_pair_groups": ["{{ppg2}}", "{{ppg1}}"], "flow_classifiers": ["{{fc15}}"]}`, "pcotherlsp"),
		step{name: "sync: delete pc-other-lsp", method: "DELETE", path: "/v2.0/sfc/port_chains/{{pcotherlsp}}", sync: true},
		pc("pc no groups", `{"port_pair_groups": []}`, ""),
		pc("pc groups missing", `{"flow_classifiers": ["{{fc1}}"]}`, ""),
		pc("pc group unknown", `{"port_pair_groups": ["`+unknown+`"]}`, ""),
		pc("pc classifier unknown", `{"port_pair_groups": ["{{ppg4}}", "{{ppg2}}"], "flow_classifiers": ["`+unknown+`"]}`, ""),
		pc("pc group twice", `{"port_pair_groups": ["{{ppg4}}", "{{ppg4}}"]}`, ""),
		pc("pc tap first", `{"name": "pc5", "port_pair_groups": ["{{ppg3}}", "{{ppg4}}"], "flow_classifiers": ["{{fc7}}"]}`, "pc5"),
		pc("pc tap last", `{"name": "pc6", "port_pair_groups": ["{{ppg4}}", "{{ppg3}}"], "flow_classifiers": ["{{fc8}}"]}`, "pc6"),
		pc("pc correlation nsh with mpls pairs", `{"port_pair_groups": ["{{ppg6}}"], "chain_parameters": {"correlation": "nsh"}}`, ""),
		pc("pc correlation bad", `{"port_pair_groups": ["{{ppg6}}"], "chain_parameters": {"correlation": "vxlan"}}`, ""),
		pc("pc parameters unknown key", `{"port_pair_groups": ["{{ppg6}}"], "chain_parameters": {"colour": 1}}`, ""),
		pc("pc symmetric not a bool", `{"port_pair_groups": ["{{ppg6}}"], "chain_parameters": {"symmetric": "often"}}`, ""),
		pc("pc symmetric without destination port", `{"name": "pc7", "port_pair_groups": ["{{ppg6}}"], "flow_classifiers": ["{{fc13}}"], "chain_parameters": {"symmetric": true}}`, "pc7"),
		step{name: "sync: delete pc7", method: "DELETE", path: "/v2.0/sfc/port_chains/{{pc7}}", sync: true},
		pc("pc symmetric", `{"name": "pc11", "port_pair_groups": ["{{ppg6}}", "{{ppg1}}"], "flow_classifiers": ["{{fc2}}"], "chain_parameters": {"symmetric": true, "correlation": "mpls"}}`, ""),
		pc("pc nsh", `{"name": "pc8", "port_pair_groups": ["{{ppg5}}"], "flow_classifiers": ["{{fc5}}"], "chain_parameters": {"correlation": "nsh"}}`, "pc8"),
		pc("pc lsp equals ldp", `{"name": "pc9", "port_pair_groups": ["{{ppg1}}"], "flow_classifiers": ["{{fc11}}"]}`, "pc9"),
		pc("pc port zero", `{"name": "pc10", "port_pair_groups": ["{{ppg1}}", "{{ppg4}}"], "flow_classifiers": ["{{fc9}}"]}`, "pc10"),
		pc("pc unknown attribute", `{"port_pair_groups": ["{{ppg6}}"], "hops": 3}`, ""),
		get("pc show", "/v2.0/sfc/port_chains/{{pc1}}"),
		get("pc show fields", "/v2.0/sfc/port_chains/{{pc3}}?fields=chain_id&fields=chain_parameters"),
		get("pc show unknown", "/v2.0/sfc/port_chains/"+unknown),
		step{name: "pc list", method: "GET", path: "/v2.0/sfc/port_chains?fields=name&fields=chain_id", unordered: true},
		step{name: "pc list filter chain_id", method: "GET", path: "/v2.0/sfc/port_chains?chain_id=7&fields=name", unordered: true},
		get("pc list sorted by chain_id", "/v2.0/sfc/port_chains?sort_key=chain_id&sort_dir=asc&fields=name&fields=chain_id"),
		step{name: "pc list page", method: "GET", path: "/v2.0/sfc/port_chains?limit=2&fields=name", page: true},
		put("pc update name", "port_chains", "port_chain", "pc2", `{"name": "pc2-renamed"}`),
		put("pc update add classifier", "port_chains", "port_chain", "pc2", `{"flow_classifiers": ["{{fc14}}"]}`),
		put("pc update add classifier in use", "port_chains", "port_chain", "pc2", `{"flow_classifiers": ["{{fc3}}"]}`),
		put("pc update remove classifiers", "port_chains", "port_chain", "pc2", `{"flow_classifiers": []}`),
		put("pc update groups", "port_chains", "port_chain", "pc2", `{"port_pair_groups": ["{{ppg2}}", "{{ppg6}}"]}`),
		put("pc update groups empty", "port_chains", "port_chain", "pc2", `{"port_pair_groups": []}`),
		put("pc update same groups as pc1", "port_chains", "port_chain", "pc2", `{"port_pair_groups": ["{{ppg1}}", "{{ppg2}}"]}`),
		put("pc update chain_id", "port_chains", "port_chain", "pc2", `{"chain_id": 9}`),
		put("pc update chain_parameters", "port_chains", "port_chain", "pc2", `{"chain_parameters": {"symmetric": true}}`),
		del("ppg delete in use", "port_pair_groups", "ppg1"),
		del("fc delete in use", "flow_classifiers", "fc2"),
		put("ppg update pairs of a chain's group", "port_pair_groups", "port_pair_group", "ppg4", `{"port_pairs": ["{{pp4}}"]}`),
	)

	// Service graphs: chains A -> B, C with classifiers that do not overlap.
	add(
		fc("sg fc a", `{"name": "sga", "protocol": "tcp", "destination_port_range_min": 6001, "destination_port_range_max": 6001, `+lsp+`}`, "fca"),
		fc("sg fc b", `{"name": "sgb", "protocol": "tcp", "destination_port_range_min": 6002, "destination_port_range_max": 6002, `+lsp+`}`, "fcb"),
		fc("sg fc c", `{"name": "sgc", "protocol": "tcp", "destination_port_range_min": 6003, "destination_port_range_max": 6003, `+lsp+`}`, "fcc"),
		fc("sg fc d", `{"name": "sgd", "protocol": "tcp", "destination_port_range_min": 6002, "destination_port_range_max": 6003, "logical_source_port": "{{port:server-eth0}}"}`, "fcd"),
		pp("sg pp 8", `{"name": "pp8", "ingress": "{{port:f3-ingress}}", "egress": "{{port:f3-ingress}}", "service_function_parameters": {"correlation": "mpls", "weight": 1}}`, "pp8"),
		ppg("sg ppg x", `{"name": "ppgx", "port_pairs": ["{{pp8}}"]}`, "ppgx"),
		pc("sg chain a", `{"name": "pca", "port_pair_groups": ["{{ppg4}}", "{{ppg6}}"], "flow_classifiers": ["{{fca}}"]}`, "pca"),
		pc("sg chain b", `{"name": "pcb", "port_pair_groups": ["{{ppg6}}", "{{ppg4}}"], "flow_classifiers": ["{{fcb}}"]}`, "pcb"),
		pc("sg chain c", `{"name": "pcc", "port_pair_groups": ["{{ppg6}}", "{{ppg2}}", "{{ppg4}}"], "flow_classifiers": ["{{fcc}}"]}`, "pcc"),
		pc("sg chain d", `{"name": "pcd", "port_pair_groups": ["{{ppgx}}", "{{ppg6}}"], "flow_classifiers": ["{{fcd}}"]}`, "pcd"),
		sg("sg duplicate destination", `{"port_chains": {"{{pca}}": ["{{pcb}}", "{{pcb}}"]}}`, ""),
		sg("sg overlapping destinations", `{"port_chains": {"{{pca}}": ["{{pcb}}", "{{pcd}}"]}}`, ""),
		step{name: "sync: delete pcd", method: "DELETE", path: "/v2.0/sfc/port_chains/{{pcd}}", sync: true},
		pc("sg chain e", `{"name": "pce", "port_pair_groups": ["{{ppg6}}", "{{ppgx}}"]}`, "pce"),
		sg("sg branching without correlation", `{"port_chains": {"{{pc10}}": ["{{pca}}"]}}`, ""),
		sg("sg destination without correlation", `{"port_chains": {"{{pca}}": ["{{pc3}}"]}}`, ""),
		sg("sg inconsistent encapsulation", `{"port_chains": {"{{pca}}": ["{{pc8}}"]}}`, ""),
		sg("sg loop", `{"port_chains": {"{{pca}}": ["{{pcb}}"], "{{pcb}}": ["{{pca}}"]}}`, ""),
		sg("sg self loop", `{"port_chains": {"{{pca}}": ["{{pca}}"]}}`, ""),
		sg("sg chain unknown", `{"port_chains": {"{{pca}}": ["`+unknown+`"]}}`, ""),
		sg("sg source not a uuid", `{"port_chains": {"pca": ["{{pcb}}"]}}`, ""),
		sg("sg destination not a uuid", `{"port_chains": {"{{pca}}": ["pcb"]}}`, ""),
		sg("sg not a dict", `{"port_chains": ["{{pca}}"]}`, ""),
		sg("sg empty", `{"name": "empty", "port_chains": {}}`, "sgempty"),
		del("sg delete empty", "service_graphs", "sgempty"),
		sg("sg missing chains", `{"name": "g"}`, ""),
		sg("sg create", `{"name": "g1", "description": "a to b and c", "port_chains": {"{{pca}}": ["{{pcb}}", "{{pcc}}"]}}`, "sg1"),
		sg("sg create second", `{"name": "g2", "port_chains": {"{{pce}}": []}}`, "sg2"),
		sg("sg chain already in a graph", `{"port_chains": {"{{pcb}}": ["{{pc4}}"]}}`, ""),
		get("sg show", "/v2.0/sfc/service_graphs/{{sg1}}"),
		get("sg show fields", "/v2.0/sfc/service_graphs/{{sg1}}?fields=name"),
		get("sg show unknown", "/v2.0/sfc/service_graphs/"+unknown),
		step{name: "sg list", method: "GET", path: "/v2.0/sfc/service_graphs", unordered: true},
		step{name: "sg list filter name", method: "GET", path: "/v2.0/sfc/service_graphs?name=g1&fields=name", unordered: true},
		put("sg update name", "service_graphs", "service_graph", "sg1", `{"name": "g1-renamed", "description": ""}`),
		put("sg update chains", "service_graphs", "service_graph", "sg1", `{"port_chains": {"{{pca}}": ["{{pcb}}"]}}`),
		put("pc update groups of a chain in a graph", "port_chains", "port_chain", "pcb", `{"port_pair_groups": ["{{ppg4}}"]}`),
		put("pc update name of a chain in a graph", "port_chains", "port_chain", "pcb", `{"name": "pcb-renamed"}`),
		del("pc delete chain in a graph", "port_chains", "pcb"),
		del("sg delete", "service_graphs", "sg1"),
		get("sg show deleted", "/v2.0/sfc/service_graphs/{{sg1}}"),
		step{name: "sg delete unknown", method: "DELETE", path: "/v2.0/sfc/service_graphs/" + unknown},
		del("sg delete second", "service_graphs", "sg2"),
	)

	// Teardown in dependency order, with the in-use errors on the way.
	add(
		del("pc delete pc1", "port_chains", "pc1"),
		get("pc show deleted", "/v2.0/sfc/port_chains/{{pc1}}"),
		del("pc delete again", "port_chains", "pc1"),
		del("ppg delete ppg1", "port_pair_groups", "ppg1"),
		del("pp delete pp1", "port_pairs", "pp1"),
		get("pp show deleted", "/v2.0/sfc/port_pairs/{{pp1}}"),
		del("fc delete fc2", "flow_classifiers", "fc2"),
		step{name: "pc list after deletes", method: "GET", path: "/v2.0/sfc/port_chains?fields=name", unordered: true},
		step{name: "ppg list after deletes", method: "GET", path: "/v2.0/sfc/port_pair_groups?fields=name", unordered: true},
		get("unknown collection", "/v2.0/sfc/port_trains"),
		step{name: "post to an id", method: "POST", path: "/v2.0/sfc/port_chains/{{pc3}}", body: `{"port_chain": {}}`},
		step{name: "delete a collection", method: "DELETE", path: "/v2.0/sfc/port_chains"},
		get("extensions", "/v2.0/extensions/sfc"),
	)
	return c
}
