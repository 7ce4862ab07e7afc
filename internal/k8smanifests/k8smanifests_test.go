package k8smanifests

import (
	"bytes"
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

const deployDir = "../../deploy"

// readAll reads every manifest of deploy/kubernetes, in the order kubectl apply -f takes them.
func readAll(t *testing.T) []Object {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(deployDir, "kubernetes", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in deploy/kubernetes: %v", err)
	}
	var objs []Object
	for _, f := range files {
		o, err := ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, o...)
	}
	return objs
}

func only[T any](t *testing.T, objs []Object) T {
	t.Helper()
	var found []T
	for _, o := range objs {
		if v, ok := o.Value.(T); ok {
			found = append(found, v)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one %T in deploy/kubernetes, found %d", *new(T), len(found))
	}
	return found[0]
}

// The manifests decode strictly into the API types and pass Check, and a Namespace comes
// before the objects in it (kubectl apply -f takes the files in name order).
func TestDeployKubernetesValid(t *testing.T) {
	objs := readAll(t)
	for _, err := range Check(objs) {
		t.Error(err)
	}
	namespaces := map[string]bool{}
	for _, o := range objs {
		if o.GVK.Kind == "Namespace" {
			namespaces[o.Name] = true
		} else if !namespaces[o.Namespace] {
			t.Errorf("%s: %s %s comes before its Namespace %s", o.Pos, o.GVK.Kind, o.Name, o.Namespace)
		}
	}
}

// The ConfigMap carries deploy/cni.hid and deploy/cni/nicstack.conflist byte for byte, the
// supervisor runs that scenario as the run the conflist and the probes name, and the init
// container installs that conflist and the plugin of the supervisor's image.
func TestDeployKubernetesConsistent(t *testing.T) {
	objs := readAll(t)
	cm := only[*corev1.ConfigMap](t, objs)
	for key, file := range map[string]string{"cni.hid": "cni.hid", "nicstack.conflist": "cni/nicstack.conflist"} {
		want, err := os.ReadFile(filepath.Join(deployDir, file))
		if err != nil {
			t.Fatal(err)
		}
		if got := cm.Data[key]; got != string(want) {
			t.Errorf("ConfigMap %s: %s differs from deploy/%s: copy the file into 10-configmap.yaml", cm.Name, key, file)
		}
	}
	var conflist struct {
		Plugins []struct {
			Type string `json:"type"`
			Run  string `json:"run"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal([]byte(cm.Data["nicstack.conflist"]), &conflist); err != nil || len(conflist.Plugins) != 1 || conflist.Plugins[0].Type != "nicstack-cni" {
		t.Fatalf("the conflist is no network of one nicstack-cni plugin: %v %+v", err, conflist)
	}

	ds := only[*appsv1.DaemonSet](t, objs)
	spec := ds.Spec.Template.Spec
	if len(spec.Containers) != 1 || len(spec.InitContainers) != 1 {
		t.Fatalf("want the supervisor and one init container, have %d and %d", len(spec.Containers), len(spec.InitContainers))
	}
	sup, install := spec.Containers[0], spec.InitContainers[0]
	if sup.Image != install.Image {
		t.Errorf("the init container installs the plugin of %s, the supervisor runs %s: a plugin speaks its own release's control protocol", install.Image, sup.Image)
	}
	cmd := sup.Command
	i := slices.Index(cmd, "--name")
	if len(cmd) < 4 || cmd[1] != "run" || i < 0 || i+1 >= len(cmd) {
		t.Fatalf("the supervisor's command %q is no nicstack run --name NAME SCENARIO", cmd)
	}
	run, scenario := cmd[i+1], cmd[len(cmd)-1]
	if conflist.Plugins[0].Run != run {
		t.Errorf("the conflist attaches pods to the run %q, the supervisor runs %q", conflist.Plugins[0].Run, run)
	}
	for name, p := range map[string]*corev1.Probe{"liveness": sup.LivenessProbe, "readiness": sup.ReadinessProbe} {
		if want := []string{cmd[0], "status", "-s", run}; p == nil || p.Exec == nil || !slices.Equal(p.Exec.Command, want) {
			t.Errorf("the %s probe is not %q", name, want)
		}
	}
	if !configFile(spec, sup, cm, scenario, "cni.hid") {
		t.Errorf("the supervisor's scenario %s is not the ConfigMap's cni.hid", scenario)
	}
	script := strings.Join(install.Command, " ")
	conflistPath := ""
	for _, f := range strings.Fields(script) {
		if strings.HasSuffix(f, ".conflist") && !strings.HasPrefix(f, "/host/") {
			conflistPath = f
		}
	}
	if !configFile(spec, install, cm, conflistPath, "nicstack.conflist") {
		t.Errorf("the init container installs %q, not the ConfigMap's nicstack.conflist", conflistPath)
	}
	if !spec.HostNetwork || spec.PriorityClassName != "system-node-critical" ||
		!slices.ContainsFunc(spec.Tolerations, func(t corev1.Toleration) bool { return t.Key == "" && t.Operator == corev1.TolerationOpExists }) {
		t.Errorf("the node's supervisor must run on every node, in its network namespace, as critical: hostNetwork %v, priorityClassName %q, tolerations %v",
			spec.HostNetwork, spec.PriorityClassName, spec.Tolerations)
	}
}

// configFile reports whether file, as container ct sees it, is key of ConfigMap cm.
func configFile(spec corev1.PodSpec, ct corev1.Container, cm *corev1.ConfigMap, file, key string) bool {
	for _, m := range ct.VolumeMounts {
		if path.Join(m.MountPath, key) != file {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil && v.ConfigMap.Name == cm.Name && len(v.ConfigMap.Items) == 0 {
				_, ok := cm.Data[key]
				return ok
			}
		}
	}
	return false
}

const valid = `# a comment before the first document
apiVersion: v1
kind: Namespace
metadata:
  name: ns
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: cm
  namespace: ns
data:
  a.txt: hello
--- # the DaemonSet
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: ds
  namespace: ns
spec:
  selector:
    matchLabels:
      app: x
  template:
    metadata:
      labels:
        app: x
    spec:
      containers:
        - name: c
          image: img
          volumeMounts:
            - name: conf
              mountPath: /etc/x
            - name: host
              mountPath: /run/x
      volumes:
        - name: conf
          configMap:
            name: cm
            items:
              - key: a.txt
                path: a.txt
        - name: host
          hostPath:
            path: /run/x
            type: Directory
`

// Each mistake a hand-written manifest makes is found, with the line of its document.
func TestRefused(t *testing.T) {
	if objs, err := Read("m.yaml", []byte(valid)); err != nil || len(objs) != 3 || len(Check(objs)) != 0 {
		t.Fatalf("the valid manifest: %v, %d objects, %v", err, len(objs), Check(objs))
	}
	for _, c := range []struct{ name, old, new, want string }{
		{"unknown field", "      containers:", "      hostNetwrok: true\n      containers:", `m.yaml:15: DaemonSet: unknown field "spec.template.spec.hostNetwrok"`},
		{"field in another case", "image: img", "Image: img", `unknown field "spec.template.spec.containers[0].Image"`},
		{"key twice", "image: img", "image: img\n          image: img2", `m.yaml:15: yaml: unmarshal errors:`},
		{"unknown kind", "kind: Namespace", "kind: Namespce", `m.yaml:1: apiVersion "v1" kind "Namespce": not a kind this check knows`},
		{"old apiVersion", "apiVersion: apps/v1", "apiVersion: apps/v1beta2", `kind "DaemonSet": not a kind this check knows`},
		{"selector", "      labels:\n        app: x", "      labels:\n        app: z", `m.yaml:15: DaemonSet ds: spec.selector: app=x does not select the template's labels map[app:z]`},
		{"YAML 1.1 boolean", "      labels:\n        app: x", "      labels:\n        app: y", `m.yaml:15: DaemonSet: json: cannot unmarshal bool into Go struct field ObjectMeta.spec.template.metadata.labels of type string`},
		{"mount of no volume", "- name: host\n              mountPath", "- name: hots\n              mountPath", `spec.template.spec.containers[0].volumeMounts[1].name: "hots": the pod has no volume of that name`},
		{"no image", "image: img", `image: ""`, `spec.template.spec.containers[0].image: "": want an image`},
		{"hostPath type", "type: Directory", "type: Dir", `spec.template.spec.volumes[1].hostPath.type: "Dir": want one of`},
		{"relative hostPath", "path: /run/x", "path: run/x", `hostPath.path: "run/x": want an absolute path`},
		{"bidirectional unprivileged", "mountPath: /run/x", "mountPath: /run/x\n              mountPropagation: Bidirectional", `volumeMounts[1].mountPropagation: Bidirectional is allowed only in a privileged container`},
		{"ConfigMap key", "- key: a.txt", "- key: b.txt", `volumes[0].configMap.items[0].key: "b.txt": ConfigMap cm has no such key`},
		{"ConfigMap", "name: cm\n            items", "name: cn\n            items", `volumes[0].configMap.name: "cn": no ConfigMap of these manifests in ns has that name`},
		{"namespace", "name: cm\n  namespace: ns", "name: cm\n  namespace: nx", `m.yaml:7: ConfigMap cm: metadata.namespace: "nx": no Namespace of these manifests has that name`},
		{"name", "name: ds", "name: DS", `DaemonSet DS: metadata.name: a lowercase RFC 1123 subdomain`},
		{"label value", "app: x", "app: -x-", `labels[app]: a valid label must be an empty string or consist of`},
		{"service account", "      containers:", "      serviceAccountName: sa\n      containers:", `serviceAccountName: "sa": no ServiceAccount of these manifests in ns has that name`},
		{"restart policy", "      containers:", "      restartPolicy: Never\n      containers:", `restartPolicy: "Never": a DaemonSet's pods restart Always`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(valid, c.old) {
				t.Fatalf("the valid manifest has no %q", c.old)
			}
			objs, err := Read("m.yaml", []byte(strings.ReplaceAll(valid, c.old, c.new)))
			var msgs []string
			if err != nil {
				msgs = append(msgs, err.Error())
			}
			for _, e := range Check(objs) {
				msgs = append(msgs, e.Error())
			}
			if !slices.ContainsFunc(msgs, func(m string) bool { return strings.Contains(m, c.want) }) {
				t.Errorf("want an error with %q, got %q", c.want, msgs)
			}
		})
	}
}

// Documents are split at "---" lines only, and each knows its first line.
func TestDocuments(t *testing.T) {
	docs := documents([]byte("a: 1\n---\nb: |\n  ---x\n--- # c\n\n"))
	var lines []int
	var texts [][]byte
	for _, d := range docs {
		lines, texts = append(lines, d.line), append(texts, d.text)
	}
	if !slices.Equal(lines, []int{1, 3, 6}) || !bytes.Equal(texts[1], []byte("b: |\n  ---x\n")) || !blank(texts[2]) {
		t.Errorf("lines %v, texts %q", lines, texts)
	}
}
