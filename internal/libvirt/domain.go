package libvirt

import (
	"encoding/xml"
	"fmt"
	"regexp"
	"strings"
)

// domain is what Check reads of a domain XML.
type domain struct {
	Name          string `xml:"name"`
	Type          string `xml:"type,attr"`
	MemoryBacking *struct {
		Source struct {
			Type string `xml:"type,attr"`
		} `xml:"source"`
		Access struct {
			Mode string `xml:"mode,attr"`
		} `xml:"access"`
	} `xml:"memoryBacking"`
	Interfaces []struct {
		Type   string `xml:"type,attr"`
		Source struct {
			Type string `xml:"type,attr"`
			Path string `xml:"path,attr"`
			Mode string `xml:"mode,attr"`
		} `xml:"source"`
		Model struct {
			Type string `xml:"type,attr"`
		} `xml:"model"`
	} `xml:"devices>interface"`
}

// Check reports what keeps a domain from working on a vm with guest="vhost-user": memory that
// is not a shared memfd (the back end maps it), no vhostuser interface, or one that is not a
// virtio client of a Unix socket at an absolute path (nicstack listens there).
func Check(text string) error {
	var d domain
	if err := xml.Unmarshal([]byte(text), &d); err != nil {
		return fmt.Errorf("domain XML: %w", err)
	}
	if d.Type != "qemu" && d.Type != "kvm" {
		return fmt.Errorf("domain type %q: want qemu (TCG) or kvm", d.Type)
	}
	mb := d.MemoryBacking
	if mb == nil || mb.Source.Type != "memfd" || mb.Access.Mode != "shared" {
		return fmt.Errorf("domain %s: want <memoryBacking><source type='memfd'/><access mode='shared'/></memoryBacking>: vhost-user maps the guest's memory", d.Name)
	}
	n := 0
	for _, i := range d.Interfaces {
		if i.Type != "vhostuser" {
			continue
		}
		n++
		s := i.Source
		if s.Type != "unix" || s.Mode != "client" || !strings.HasPrefix(s.Path, "/") || i.Model.Type != "virtio" {
			return fmt.Errorf("domain %s: vhostuser interface with source type=%q mode=%q path=%q, model %q: want type='unix', mode='client' (nicstack listens), the vm's absolute socket path, model virtio",
				d.Name, s.Type, s.Mode, s.Path, i.Model.Type)
		}
	}
	if n == 0 {
		return fmt.Errorf("domain %s: no <interface type='vhostuser'>", d.Name)
	}
	return nil
}

// Guest is what Fit puts into a domain XML.
type Guest struct {
	Name                    string // the domain's name
	KVM                     bool   // type='kvm', else 'qemu' (TCG)
	Kernel, Initrd, Cmdline string // direct kernel boot
	Socket                  string // the vm's vhost-user socket
	Console                 string // the file the serial console is written to
}

// Fit returns text, a domain XML such as deploy/libvirt's, with g's values in place of its
// own, and checks the result. Each place must be there once: the domain's type, name, the
// <os>'s kernel, initrd and cmdline, the vhostuser interface's source path and the serial
// console's file.
func Fit(text string, g Guest) (string, error) {
	typ := "qemu"
	if g.KVM {
		typ = "kvm"
	}
	for _, r := range []struct {
		what, pattern, value string
	}{
		{"domain type", `(<domain type=')[^']*(')`, typ},
		{"name", `(<name>)[^<]*(</name>)`, g.Name},
		{"kernel", `(<kernel>)[^<]*(</kernel>)`, g.Kernel},
		{"initrd", `(<initrd>)[^<]*(</initrd>)`, g.Initrd},
		{"cmdline", `(<cmdline>)[^<]*(</cmdline>)`, g.Cmdline},
		{"vhostuser socket", `(?s)(<interface type='vhostuser'>\s*<source type='unix' path=')[^']*(')`, g.Socket},
		{"serial console file", `(?s)(<serial type='file'>\s*<source path=')[^']*(')`, g.Console},
	} {
		re := regexp.MustCompile(r.pattern)
		if n := len(re.FindAllStringIndex(text, -1)); n != 1 {
			return "", fmt.Errorf("domain XML: %d places for the %s (%s), want 1", n, r.what, r.pattern)
		}
		var v strings.Builder
		xml.EscapeText(&v, []byte(r.value)) // a command line's && and quotes
		at := re.FindStringSubmatchIndex(text)
		text = text[:at[3]] + v.String() + text[at[4]:]
	}
	return text, Check(text)
}
