package api

// The networking-sfc resources, with networking-sfc's JSON field names. Optional fields that
// networking-sfc reports as null are pointers.

// Resource is what every networking-sfc resource starts with: its id, name, description and
// owner. Embedded, its fields stay first and at the top level of the resource's JSON.
type Resource struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description"`
	TenantID    string `json:"tenant_id"`
	ProjectID   string `json:"project_id"`
}

// FlowClassifier selects the traffic that enters a port chain.
type FlowClassifier struct {
	Resource
	Ethertype               string         `json:"ethertype"`
	Protocol                *string        `json:"protocol"`
	SourcePortRangeMin      *int           `json:"source_port_range_min"`
	SourcePortRangeMax      *int           `json:"source_port_range_max"`
	DestinationPortRangeMin *int           `json:"destination_port_range_min"`
	DestinationPortRangeMax *int           `json:"destination_port_range_max"`
	SourceIPPrefix          *string        `json:"source_ip_prefix"`
	DestinationIPPrefix     *string        `json:"destination_ip_prefix"`
	LogicalSourcePort       *string        `json:"logical_source_port"`
	LogicalDestinationPort  *string        `json:"logical_destination_port"`
	L7Parameters            map[string]any `json:"l7_parameters"`
}

// SFParameters are a port pair's service_function_parameters.
type SFParameters struct {
	Correlation *string `json:"correlation"`
	Weight      int     `json:"weight"`
}

// PortPair is one instance of a service function: the port traffic enters it by and the port
// it leaves by.
type PortPair struct {
	Resource
	Ingress                   string       `json:"ingress"`
	Egress                    string       `json:"egress"`
	ServiceFunctionParameters SFParameters `json:"service_function_parameters"`
}

// NTupleMapping is a port pair group's ppg_n_tuple_mapping.
type NTupleMapping struct {
	IngressNTuple map[string]any `json:"ingress_n_tuple"`
	EgressNTuple  map[string]any `json:"egress_n_tuple"`
}

// PPGParameters are a port pair group's port_pair_group_parameters.
type PPGParameters struct {
	LBFields         []string      `json:"lb_fields"`
	PPGNTupleMapping NTupleMapping `json:"ppg_n_tuple_mapping"`
}

// PortPairGroup is the instances of one service function; flows are spread over its port
// pairs. A tap group only receives a copy of the traffic.
type PortPairGroup struct {
	Resource
	GroupID                 int           `json:"group_id"`
	PortPairs               []string      `json:"port_pairs"`
	TapEnabled              bool          `json:"tap_enabled"`
	PortPairGroupParameters PPGParameters `json:"port_pair_group_parameters"`
}

// ChainParameters are a port chain's chain_parameters.
type ChainParameters struct {
	Correlation string `json:"correlation"`
	Symmetric   bool   `json:"symmetric"`
}

// PortChain is flow classifiers and the ordered port pair groups their traffic crosses.
type PortChain struct {
	Resource
	ChainID         int             `json:"chain_id"`
	PortPairGroups  []string        `json:"port_pair_groups"`
	FlowClassifiers []string        `json:"flow_classifiers"`
	ChainParameters ChainParameters `json:"chain_parameters"`
}

// ServiceGraph links port chains: port_chains maps a source chain to the chains its traffic
// continues on.
type ServiceGraph struct {
	Resource
	PortChains map[string][]string `json:"port_chains"`
}
