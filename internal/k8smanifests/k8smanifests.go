// Package k8smanifests reads Kubernetes manifests strictly into the API's own Go types
// (k8s.io/api), as an API server decodes them: a field the type does not have, a field in the
// wrong case or a key given twice is an error, and so is a kind the package does not know.
// Check then finds what a cluster's validation would refuse and a typo would cause in those
// kinds. No cluster is needed: deploy/kubernetes is tested with it.
package k8smanifests

import (
	"bytes"
	"fmt"
	"os"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// An Object is one document of a manifest, decoded.
type Object struct {
	Pos  string // file:line of the document's first line
	GVK  schema.GroupVersionKind
	Name string
	// Namespace is the object's namespace; empty for a Namespace.
	Namespace string
	// Value is a pointer to the API type: *corev1.Namespace, *corev1.ConfigMap,
	// *corev1.ServiceAccount or *appsv1.DaemonSet.
	Value any
}

// kinds are the types this package decodes into, by apiVersion and kind.
var kinds = map[schema.GroupVersionKind]func() any{
	corev1.SchemeGroupVersion.WithKind("Namespace"):      func() any { return new(corev1.Namespace) },
	corev1.SchemeGroupVersion.WithKind("ConfigMap"):      func() any { return new(corev1.ConfigMap) },
	corev1.SchemeGroupVersion.WithKind("ServiceAccount"): func() any { return new(corev1.ServiceAccount) },
	appsv1.SchemeGroupVersion.WithKind("DaemonSet"):      func() any { return new(appsv1.DaemonSet) },
}

// ReadFile reads the manifest at path: one or more YAML documents separated by "---" lines.
func ReadFile(path string) ([]Object, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Read(path, data)
}

// Read reads the documents of data, a manifest called name in errors.
func Read(name string, data []byte) ([]Object, error) {
	var objs []Object
	for _, d := range documents(data) {
		pos := fmt.Sprintf("%s:%d", name, d.line)
		if blank(d.text) {
			continue
		}
		o, err := decode(d.text)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", pos, err)
		}
		o.Pos = pos
		objs = append(objs, o)
	}
	return objs, nil
}

type document struct {
	line int // of its first line, from 1
	text []byte
}

// documents splits a YAML stream at its "---" lines (a marker may carry a comment).
func documents(data []byte) []document {
	var docs []document
	cur := document{line: 1}
	lines := bytes.SplitAfter(data, []byte("\n"))
	for i, l := range lines {
		t := strings.TrimRight(string(l), " \t\r\n")
		if t == "---" || strings.HasPrefix(t, "--- #") {
			docs = append(docs, cur)
			cur = document{line: i + 2}
			continue
		}
		cur.text = append(cur.text, l...)
	}
	return append(docs, cur)
}

// blank reports whether a document holds nothing but comments and blank lines.
func blank(text []byte) bool {
	for _, l := range strings.Split(string(text), "\n") {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "#") {
			return false
		}
	}
	return true
}

// decode turns one document into the type its apiVersion and kind name, refusing duplicate
// keys (YAMLToJSONStrict) and, as the API server's strict field validation does, fields the
// type lacks or spells in another case (sigs.k8s.io/json).
func decode(text []byte) (Object, error) {
	j, err := yaml.YAMLToJSONStrict(text)
	if err != nil {
		return Object{}, err
	}
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(j, &head); err != nil {
		return Object{}, err
	}
	gv, err := schema.ParseGroupVersion(head.APIVersion)
	if err != nil {
		return Object{}, err
	}
	gvk := gv.WithKind(head.Kind)
	newValue, ok := kinds[gvk]
	if !ok {
		return Object{}, fmt.Errorf("apiVersion %q kind %q: not a kind this check knows (add its type to k8smanifests.kinds)", head.APIVersion, head.Kind)
	}
	v := newValue()
	strict, err := kjson.UnmarshalStrict(j, v, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return Object{}, fmt.Errorf("%s: %w", head.Kind, err)
	}
	if len(strict) > 0 {
		msgs := make([]string, len(strict))
		for i, e := range strict {
			msgs[i] = e.Error()
		}
		return Object{}, fmt.Errorf("%s: %s", head.Kind, strings.Join(msgs, "; "))
	}
	meta := v.(metav1.Object)
	return Object{GVK: gvk, Name: meta.GetName(), Namespace: meta.GetNamespace(), Value: v}, nil
}
