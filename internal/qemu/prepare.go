package qemu

import (
	"context"
	"os"
	"path/filepath"

	"github.com/nicstack/nicstack/runtime/config"
)

// PrepareImage builds the image of the scenario's guest programs (a <start> running
// `nicstack guest` that takes ImageEnv as <env key="NICSTACK_GUEST_IMAGE" .../>) when ImageEnv
// is not set, and sets it for them: a program runs confined, without a home to build or cache
// an image in. It reports whether it built one.
func PrepareImage(ctx context.Context, root *config.Node) (bool, error) {
	if os.Getenv(ImageEnv) != "" {
		return false, nil
	}
	for _, st := range root.Subs("start") {
		cfg := st.Sub("config")
		if cfg == nil {
			continue
		}
		var guest, scenarios, takesImage bool
		for _, a := range cfg.Subs("arg") {
			switch a.String("value", "") {
			case "guest":
				guest = true
			case "--scenarios":
				scenarios = true
			}
		}
		for _, e := range cfg.Subs("env") {
			takesImage = takesImage || e.String("key", "") == ImageEnv
		}
		if !guest || !takesImage {
			continue
		}
		im, err := BuildImage(ctx)
		if scenarios {
			im, err = BuildScenarioImage(ctx, false) // as `nicstack guest --scenarios` boots it
		}
		if err != nil {
			return false, err
		}
		return true, os.Setenv(ImageEnv, filepath.Dir(im.Kernel))
	}
	return false, nil
}
