package oracle

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// Mirror creates in the oracle a network for each network the Neutron endpoint from serves
// and a port for each of its ports that GET /v2.0/ports+portQuery lists (same name, same
// device_id, on the mirrored network), so that requests naming ports by name, or port pairs
// needing ports of one device, run the same against both servers. It returns the oracle's
// id for each mirrored network and port id of from.
func (o *Oracle) Mirror(ctx context.Context, from, portQuery string) (map[string]string, error) {
	ids := map[string]string{}
	var nets struct {
		Networks []struct{ ID, Name string }
	}
	if err := call(ctx, http.MethodGet, from+"/v2.0/networks", nil, &nets); err != nil {
		return nil, fmt.Errorf("mirror networks: %w", err)
	}
	for _, n := range nets.Networks {
		var created struct{ Network struct{ ID string } }
		if err := call(ctx, http.MethodPost, o.URL+"/v2.0/networks", map[string]any{"network": map[string]any{"name": n.Name}}, &created); err != nil {
			return nil, fmt.Errorf("mirror network %s: %w", n.Name, err)
		}
		ids[n.ID] = created.Network.ID
	}
	var ports struct {
		Ports []struct {
			ID        string `json:"id"`
			Name      string `json:"name"`
			NetworkID string `json:"network_id"`
			DeviceID  string `json:"device_id"`
		}
	}
	if err := call(ctx, http.MethodGet, from+"/v2.0/ports"+portQuery, nil, &ports); err != nil {
		return nil, fmt.Errorf("mirror ports: %w", err)
	}
	for _, p := range ports.Ports {
		var created struct{ Port struct{ ID string } }
		body := map[string]any{"port": map[string]any{"name": p.Name, "network_id": ids[p.NetworkID], "device_id": p.DeviceID}}
		if err := call(ctx, http.MethodPost, o.URL+"/v2.0/ports", body, &created); err != nil {
			return nil, fmt.Errorf("mirror port %s: %w", p.Name, err)
		}
		ids[p.ID] = created.Port.ID
	}
	return ids, nil
}

// call sends a JSON request and decodes a 2xx answer into out.
func call(ctx context.Context, method, url string, body, out any) error {
	var rd *bytes.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(data)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		var e bytes.Buffer
		_, _ = e.ReadFrom(resp.Body)
		return fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, e.String())
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
