package api

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// queryControl are list parameters that are not attribute filters.
var queryControl = []string{"fields", "limit", "marker", "sort_key", "sort_dir", "page_reverse", "verbose"}

// listBody answers a list request as Neutron does with native pagination and sorting:
//
//   - filters ?ATTR=V (repeated for "any of") on the items' scalar attributes; filters on
//     attributes the resource does not have are ignored (networking-sfc validates none);
//   - sort_key and sort_dir: networking-sfc marks no attribute as a sort key, so any
//     sort_key is refused ("['K'] is invalid attribute for sort_keys"), as are sort_dir
//     without as many sort_key and directions other than asc and desc;
//   - limit (0 or absent: everything, in creation order) pages in id order: items after
//     ?marker=ID (before it with page_reverse=true), and COLLECTION_links with the "next"
//     and "previous" pages as neutron's get_pagination_links builds them; an unknown marker
//     gives an empty page;
//   - ?fields= selects attributes.
func listBody(items []any, r *http.Request, plural string, fieldsOf func(url.Values) url.Values) (map[string]any, error) {
	q := r.URL.Query()
	limit, err := listLimit(q)
	if err != nil {
		return nil, err
	}
	if err := checkSorts(q); err != nil {
		return nil, err
	}
	all := make([]map[string]any, 0, len(items))
	for _, it := range items {
		if m := toMap(it); matches(m, q) {
			all = append(all, m)
		}
	}
	body := map[string]any{}
	page := all
	if limit > 0 {
		marker, reverse := q.Get("marker"), strings.EqualFold(q.Get("page_reverse"), "true")
		slices.SortStableFunc(all, func(a, b map[string]any) int {
			return strings.Compare(fmt.Sprint(a["id"]), fmt.Sprint(b["id"]))
		})
		page = pageOf(all, marker, limit, reverse)
		body[plural+"_links"] = pageLinks(r, page, limit, reverse)
	}
	out := make([]map[string]any, len(page))
	fq := q
	if fieldsOf != nil {
		fq = fieldsOf(q)
	}
	for i, m := range page {
		out[i] = selectFields(m, fq)
	}
	body[plural] = out
	return body, nil
}

// listLimit is ?limit= as neutron reads it (0 when absent).
func listLimit(q url.Values) (int, error) {
	lim := q.Get("limit")
	if lim == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(lim))
	if err != nil || n < 0 {
		return 0, badRequest("BadRequest", "Bad limit request: Limit must be an integer 0 or greater and not '%s'.", lim)
	}
	return n, nil
}

// checkSorts refuses sort parameters as neutron's get_sorts does for resources without sort
// keys (all of networking-sfc's).
func checkSorts(q url.Values) error {
	keys, dirs := nonEmpty(q["sort_key"]), nonEmpty(q["sort_dir"])
	if len(keys) != len(dirs) {
		return badRequest("HTTPBadRequest", "The number of sort_keys and sort_dirs must be same")
	}
	if len(keys) > 0 {
		return badRequest("HTTPBadRequest", "%s is invalid attribute for sort_keys", pyList(keys))
	}
	return nil
}

func nonEmpty(vs []string) []string {
	var out []string
	for _, v := range vs {
		if v != "" {
			out = append(out, v)
		}
	}
	return out
}

// pageOf is the page of sorted items after marker (before it when reverse).
func pageOf(items []map[string]any, marker string, limit int, reverse bool) []map[string]any {
	i := 0
	if reverse {
		i = len(items)
	}
	if marker != "" {
		i = slices.IndexFunc(items, func(m map[string]any) bool { return m["id"] == marker })
		if i < 0 {
			return []map[string]any{}
		}
		if !reverse {
			i++
		}
	}
	if reverse {
		return items[max(i-limit, 0):i]
	}
	return items[i:min(i+limit, len(items))]
}

// pageLinks are the next and previous links of a page (neutron's get_pagination_links).
func pageLinks(r *http.Request, page []map[string]any, limit int, reverse bool) []map[string]string {
	links := []map[string]string{}
	// The request's parameters in their order, marker and page_reverse moved to the end.
	var kept []string
	for _, kv := range strings.Split(r.URL.RawQuery, "&") {
		k, _, _ := strings.Cut(kv, "=")
		if kv != "" && k != "marker" && k != "page_reverse" {
			kept = append(kept, kv)
		}
	}
	link := func(rel string, marker any, setReverse bool) {
		q := slices.Clone(kept)
		if marker != nil {
			q = append(q, "marker="+url.QueryEscape(fmt.Sprint(marker)))
		}
		if setReverse {
			q = append(q, "page_reverse=True")
		}
		links = append(links, map[string]string{"rel": rel, "href": baseURL(r) + r.URL.Path + "?" + strings.Join(q, "&")})
	}
	if !(len(page) < limit && !reverse) {
		var marker any
		if len(page) > 0 {
			marker = page[len(page)-1]["id"]
		}
		link("next", marker, false)
	}
	if !(len(page) < limit && reverse) {
		var marker any
		if len(page) > 0 {
			marker = page[0]["id"]
		}
		link("previous", marker, true)
	}
	return links
}
