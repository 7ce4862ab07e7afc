package qemu

import (
	"context"
	"testing"

	"github.com/nicstack/nicstack/runtime/config"
)

// A scenario without a guest program that takes the image builds nothing; a set ImageEnv is
// left as it is.
func TestPrepareImageOnlyForGuests(t *testing.T) {
	for _, text := range []string{
		`<config><start name="a"><config><arg value="nicstack"/><arg value="iperf"/></config></start></config>`,
		`<config><start name="g"><config><arg value="nicstack"/><arg value="guest"/></config></start></config>`,
	} {
		root, err := config.Parse("test.xml", []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		t.Setenv(ImageEnv, "")
		if built, err := PrepareImage(context.Background(), root); built || err != nil {
			t.Errorf("%s: built %v, %v; want nothing built", text, built, err)
		}
	}
	t.Setenv(ImageEnv, "/prebuilt")
	root, _ := config.Parse("test.xml", []byte(`<config><start name="g"><config><arg value="guest"/><env key="NICSTACK_GUEST_IMAGE" open="yes"/></config></start></config>`))
	if built, err := PrepareImage(context.Background(), root); built || err != nil {
		t.Errorf("with %s set: built %v, %v", ImageEnv, built, err)
	}
}
