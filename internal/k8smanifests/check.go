package k8smanifests

import (
	"fmt"
	"path"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

// hostPathTypes are the types a hostPath volume may have (k8s.io/api/core/v1.HostPathType).
var hostPathTypes = []corev1.HostPathType{
	corev1.HostPathUnset, corev1.HostPathDirectoryOrCreate, corev1.HostPathDirectory,
	corev1.HostPathFileOrCreate, corev1.HostPathFile, corev1.HostPathSocket,
	corev1.HostPathCharDev, corev1.HostPathBlockDev,
}

// Check checks a set of objects that are applied together, for what a cluster's validation
// refuses in them (names, labels, a DaemonSet's selector, volumes and mounts, a bidirectional
// mount without privilege) and for references that must resolve among them (a namespace, a
// service account, a ConfigMap and its keys), which a cluster would take and fail on later.
// Each error begins with the file:line of its object.
func Check(objs []Object) []error {
	c := &checker{objs: objs}
	seen := map[string]string{}
	for _, o := range objs {
		c.o = o
		id := o.GVK.String() + " " + o.Namespace + "/" + o.Name
		if first, dup := seen[id]; dup {
			c.errorf("metadata.name", "%q again (first at %s)", o.Name, first)
		}
		seen[id] = o.Pos
		m := o.Value.(metav1.Object)
		if o.GVK.Kind == "Namespace" {
			c.msgs("metadata.name", validation.IsDNS1123Label(o.Name))
		} else {
			c.msgs("metadata.name", validation.IsDNS1123Subdomain(o.Name))
			if c.find("Namespace", "", o.Namespace) == nil {
				c.errorf("metadata.namespace", "%q: no Namespace of these manifests has that name", o.Namespace)
			}
		}
		c.labels("metadata.labels", m.GetLabels())
		switch v := o.Value.(type) {
		case *corev1.ConfigMap:
			for k := range v.Data {
				c.msgs("data["+k+"]", validation.IsConfigMapKey(k))
			}
		case *appsv1.DaemonSet:
			c.daemonSet(v)
		}
	}
	return c.errs
}

type checker struct {
	objs []Object
	o    Object // the object being checked
	errs []error
}

func (c *checker) errorf(field, format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf("%s: %s %s: %s: %s", c.o.Pos, c.o.GVK.Kind, c.o.Name, field, fmt.Sprintf(format, args...)))
}

// msgs reports the messages of one of apimachinery's validation functions.
func (c *checker) msgs(field string, msgs []string) {
	for _, m := range msgs {
		c.errorf(field, "%s", m)
	}
}

func (c *checker) labels(field string, l map[string]string) {
	for k, v := range l {
		c.msgs(field+"["+k+"]", validation.IsQualifiedName(k))
		c.msgs(field+"["+k+"]", validation.IsValidLabelValue(v))
	}
}

// find returns the value of the object of kind in namespace ns called name, nil if none is.
func (c *checker) find(kind, ns, name string) any {
	for _, o := range c.objs {
		if o.GVK.Kind == kind && o.Namespace == ns && o.Name == name {
			return o.Value
		}
	}
	return nil
}

func (c *checker) daemonSet(ds *appsv1.DaemonSet) {
	tmpl := ds.Spec.Template
	c.labels("spec.template.metadata.labels", tmpl.Labels)
	if ds.Spec.Selector == nil {
		c.errorf("spec.selector", "missing")
	} else if sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector); err != nil {
		c.errorf("spec.selector", "%v", err)
	} else if sel.Empty() {
		c.errorf("spec.selector", "empty: it would select every pod of the namespace")
	} else if !sel.Matches(labels.Set(tmpl.Labels)) {
		c.errorf("spec.selector", "%s does not select the template's labels %v", sel, tmpl.Labels)
	}
	c.podSpec("spec.template.spec", &tmpl.Spec)
}

func (c *checker) podSpec(field string, spec *corev1.PodSpec) {
	if p := spec.RestartPolicy; p != "" && p != corev1.RestartPolicyAlways {
		c.errorf(field+".restartPolicy", "%q: a DaemonSet's pods restart Always", p)
	}
	if sa := spec.ServiceAccountName; sa != "" && c.find("ServiceAccount", c.o.Namespace, sa) == nil {
		c.errorf(field+".serviceAccountName", "%q: no ServiceAccount of these manifests in %s has that name", sa, c.o.Namespace)
	}
	volumes := map[string]bool{}
	for i, v := range spec.Volumes {
		f := fmt.Sprintf("%s.volumes[%d]", field, i)
		c.msgs(f+".name", validation.IsDNS1123Label(v.Name))
		if volumes[v.Name] {
			c.errorf(f+".name", "%q again", v.Name)
		}
		volumes[v.Name] = true
		c.volume(f, v)
	}
	names := map[string]bool{}
	all := append(slices.Clone(spec.InitContainers), spec.Containers...)
	for i, ct := range all {
		f := fmt.Sprintf("%s.containers[%d]", field, i-len(spec.InitContainers))
		if i < len(spec.InitContainers) {
			f = fmt.Sprintf("%s.initContainers[%d]", field, i)
		}
		c.msgs(f+".name", validation.IsDNS1123Label(ct.Name))
		if names[ct.Name] {
			c.errorf(f+".name", "%q again", ct.Name)
		}
		names[ct.Name] = true
		c.container(f, &ct, volumes)
	}
	if len(spec.Containers) == 0 {
		c.errorf(field+".containers", "none")
	}
}

func (c *checker) volume(field string, v corev1.Volume) {
	switch {
	case v.HostPath != nil:
		if !path.IsAbs(v.HostPath.Path) {
			c.errorf(field+".hostPath.path", "%q: want an absolute path", v.HostPath.Path)
		}
		if t := v.HostPath.Type; t != nil && !slices.Contains(hostPathTypes, *t) {
			c.errorf(field+".hostPath.type", "%q: want one of %v", *t, hostPathTypes[1:])
		}
	case v.ConfigMap != nil:
		cm, _ := c.find("ConfigMap", c.o.Namespace, v.ConfigMap.Name).(*corev1.ConfigMap)
		if cm == nil {
			if v.ConfigMap.Optional == nil || !*v.ConfigMap.Optional {
				c.errorf(field+".configMap.name", "%q: no ConfigMap of these manifests in %s has that name", v.ConfigMap.Name, c.o.Namespace)
			}
			return
		}
		for i, it := range v.ConfigMap.Items {
			if _, ok := cm.Data[it.Key]; !ok {
				c.errorf(fmt.Sprintf("%s.configMap.items[%d].key", field, i), "%q: ConfigMap %s has no such key", it.Key, cm.Name)
			}
		}
	}
}

func (c *checker) container(field string, ct *corev1.Container, volumes map[string]bool) {
	if ct.Image == "" || strings.TrimSpace(ct.Image) != ct.Image {
		c.errorf(field+".image", "%q: want an image", ct.Image)
	}
	privileged := ct.SecurityContext != nil && ct.SecurityContext.Privileged != nil && *ct.SecurityContext.Privileged
	paths := map[string]bool{}
	for i, m := range ct.VolumeMounts {
		f := fmt.Sprintf("%s.volumeMounts[%d]", field, i)
		if !volumes[m.Name] {
			c.errorf(f+".name", "%q: the pod has no volume of that name", m.Name)
		}
		if !path.IsAbs(m.MountPath) {
			c.errorf(f+".mountPath", "%q: want an absolute path", m.MountPath)
		}
		if paths[m.MountPath] {
			c.errorf(f+".mountPath", "%q again", m.MountPath)
		}
		paths[m.MountPath] = true
		if p := m.MountPropagation; p != nil && *p == corev1.MountPropagationBidirectional && !privileged {
			c.errorf(f+".mountPropagation", "Bidirectional is allowed only in a privileged container")
		}
	}
	for name, p := range map[string]*corev1.Probe{"livenessProbe": ct.LivenessProbe, "readinessProbe": ct.ReadinessProbe, "startupProbe": ct.StartupProbe} {
		if p != nil && p.Exec != nil && len(p.Exec.Command) == 0 {
			c.errorf(field+"."+name+".exec.command", "empty")
		}
	}
}
