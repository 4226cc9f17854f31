// Renders Kontainer Driver Metadata's add-on templates as RKE does (Go text/template with the functions
// RKE registers), so the kdm tests can compare RKE's objects with rke-py's. tests/kdm/kdm.py builds it
// with KDM's own templates package (pkg/rke/templates) compiled in; nothing else outside the standard
// library, as no Go module can be fetched here.
//
// `kdm-render templates` prints that package's LoadK8sVersionedTemplates() as JSON: per add-on, version
// range -> template name, and under "templateKeys" each template's text. `kdm-render` renders one
// template; its input on stdin is JSON:
//
//	{"template": "...", "data": {...}, "pointers": ["UpdateStrategy"]}
//
// `data` holds the fields of RKE's options struct by their Go names; the fields named in `pointers` are
// pointers in RKE's struct (always set), so `{{if .X}}` is true for them even when they are empty.
// Output: the rendered text.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"text/template"

	"rke-py.local/kdm-renderer/templates"
)

type input struct {
	Template string                 `json:"template"`
	Data     map[string]interface{} `json:"data"`
	Pointers []string               `json:"pointers"`
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "templates" {
		if err := json.NewEncoder(os.Stdout).Encode(templates.LoadK8sVersionedTemplates()); err != nil {
			fail(err)
		}
		return
	}
	var in input
	dec := json.NewDecoder(os.Stdin)
	dec.UseNumber()
	if err := dec.Decode(&in); err != nil {
		fail(err)
	}
	data := map[string]interface{}{}
	for k, v := range in.Data {
		data[k] = numbers(v)
	}
	for _, name := range in.Pointers {
		v := data[name]
		data[name] = &v
	}
	t, err := template.New("addon").Funcs(funcs()).Parse(in.Template)
	if err != nil {
		fail(err)
	}
	if err := t.Execute(os.Stdout, data); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "render:", err)
	os.Exit(1)
}

// numbers turns JSON numbers into the int64 (or float64) a Go struct field would hold.
func numbers(v interface{}) interface{} {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case map[string]interface{}:
		for k, e := range x {
			x[k] = numbers(e)
		}
	case []interface{}:
		for i, e := range x {
			x[i] = numbers(e)
		}
	}
	return v
}

// funcs: RKE's toYaml and GetKubednsStubDomains, and the sprig functions the templates call.
func funcs() template.FuncMap {
	return template.FuncMap{
		"toYaml": func(v interface{}) string {
			b, err := json.Marshal(v)
			if err != nil {
				return ""
			}
			var generic interface{}
			if err := json.Unmarshal(b, &generic); err != nil {
				return ""
			}
			var out bytes.Buffer
			yamlValue(&out, generic, 0, false)
			return strings.TrimSuffix(out.String(), "\n")
		},
		"GetKubednsStubDomains": func(v interface{}) string {
			b, _ := json.Marshal(v)
			return string(b)
		},
		"indent": func(n int, s string) string {
			pad := strings.Repeat(" ", n)
			return pad + strings.ReplaceAll(s, "\n", "\n"+pad)
		},
		"default": func(d interface{}, given ...interface{}) interface{} {
			if len(given) == 0 || empty(given[0]) {
				return d
			}
			return given[0]
		},
		"splitList": func(sep, s string) []string { return strings.Split(s, sep) },
		"first": func(list interface{}) interface{} {
			v := reflect.ValueOf(list)
			if v.Kind() != reflect.Slice || v.Len() == 0 {
				return nil
			}
			return v.Index(0).Interface()
		},
		"last": func(list interface{}) interface{} {
			v := reflect.ValueOf(list)
			if v.Kind() != reflect.Slice || v.Len() == 0 {
				return nil
			}
			return v.Index(v.Len() - 1).Interface()
		},
	}
}

// empty is sprig's: nil, a zero number, false, and an empty string, slice or map.
func empty(v interface{}) bool {
	r := reflect.ValueOf(v)
	if !r.IsValid() {
		return true
	}
	switch r.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return r.Len() == 0
	case reflect.Bool:
		return !r.Bool()
	case reflect.Int, reflect.Int64, reflect.Int32:
		return r.Int() == 0
	case reflect.Float64, reflect.Float32:
		return r.Float() == 0
	case reflect.Ptr, reflect.Interface:
		return r.IsNil()
	}
	return false
}

// yamlValue writes JSON-decoded data as block YAML with sorted keys, as ghodss/yaml's JSONToYAML does;
// strings are double-quoted, which YAML reads as JSON reads them.
func yamlValue(out *bytes.Buffer, v interface{}, indent int, inList bool) {
	pad := strings.Repeat(" ", indent)
	switch x := v.(type) {
	case map[string]interface{}:
		if len(x) == 0 {
			out.WriteString("{}\n")
			return
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for i, k := range keys {
			if i > 0 || !inList {
				out.WriteString(pad)
			}
			out.WriteString(strconv.Quote(k) + ":")
			child(out, x[k], indent)
		}
	case []interface{}:
		if len(x) == 0 {
			out.WriteString("[]\n")
			return
		}
		for i, e := range x {
			if i > 0 || !inList {
				out.WriteString(pad)
			}
			out.WriteString("- ")
			if m, ok := e.(map[string]interface{}); ok && len(m) > 0 {
				yamlValue(out, e, indent+2, true)
			} else if l, ok := e.([]interface{}); ok && len(l) > 0 {
				yamlValue(out, e, indent+2, true)
			} else {
				scalar(out, e)
			}
		}
	default:
		scalar(out, v)
	}
}

func child(out *bytes.Buffer, v interface{}, indent int) {
	switch x := v.(type) {
	case map[string]interface{}:
		if len(x) > 0 {
			out.WriteString("\n")
			yamlValue(out, v, indent+2, false)
			return
		}
	case []interface{}:
		if len(x) > 0 {
			out.WriteString("\n")
			yamlValue(out, v, indent, false)
			return
		}
	}
	out.WriteString(" ")
	yamlValue(out, v, indent, false)
}

func scalar(out *bytes.Buffer, v interface{}) {
	switch x := v.(type) {
	case string:
		out.WriteString(strconv.Quote(x))
	case nil:
		out.WriteString("null")
	default:
		b, _ := json.Marshal(x)
		out.Write(b)
	}
	out.WriteString("\n")
}
