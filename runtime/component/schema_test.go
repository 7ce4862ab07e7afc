package component

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	controlpb "github.com/nicstack/nicstack/proto"
	"github.com/nicstack/nicstack/runtime/config"
)

// tagged is the typed config of countingSpec's component.
type tagged struct{ tag uint64 }

// countingSpec is a Spec whose Parse counts its calls and refuses tag 0.
func countingSpec(parses *int) Spec {
	return Spec{
		Schema: &config.Schema{Type: "config", Attrs: []string{"tag"}},
		Parse: Parser(func(n *config.Node, _ string) (tagged, error) {
			*parses++
			v, err := n.Number("tag", 0)
			if err == nil && v == 0 {
				err = fmt.Errorf("tag 0")
			}
			return tagged{v}, err
		}),
		Files: func(cfg any) []string {
			if c, ok := cfg.(tagged); ok {
				return []string{fmt.Sprintf("report.%d", c.tag)}
			}
			return nil
		},
	}
}

// typedRecorder keeps the tags of the typed configs it gets.
type typedRecorder struct {
	recorder
	tags []uint64
}

func (r *typedRecorder) Configure(cfg any) error {
	c, err := ConfigOf[tagged](cfg)
	if err != nil {
		return err
	}
	r.tags = append(r.tags, c.tag)
	return nil
}

// The component parses each config it is handed once, with its Spec's Parse, and hands
// Configure the typed value; a config Parse refuses is refused and not configured.
func TestConfigParsedOncePerDelivery(t *testing.T) {
	var parses int
	rec := &typedRecorder{}
	c := New(countingSpec(&parses), slog.New(slog.DiscardHandler), func(*Component) (Handler, error) { return rec, nil })
	ctx := context.Background()
	if _, err := c.Start(ctx, &controlpb.StartRequest{Name: "t", Config: &controlpb.Config{Text: `<config tag="1"/>`}}); err != nil {
		t.Fatal(err)
	}
	if parses != 1 {
		t.Errorf("start parsed the config %d times, want once", parses)
	}
	if _, err := c.UpdateConfig(ctx, &controlpb.Config{Text: `<config tag="2"/>`}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.UpdateConfig(ctx, &controlpb.Config{Text: `<config tag="0"/>`}); err == nil {
		t.Error("a config Parse refuses was taken")
	}
	if parses != 3 {
		t.Errorf("3 deliveries parsed %d times, want 3", parses)
	}
	if fmt.Sprint(rec.tags) != "[1 2]" {
		t.Errorf("Configure got %v, want [1 2]", rec.tags)
	}
}

// Check parses once and hands back the typed value Files takes; a Spec without Parse gives
// the node itself.
func TestCheckHandsTheTypedConfig(t *testing.T) {
	var parses int
	spec := countingSpec(&parses)
	n, err := config.ParseXML("t", []byte(`<config tag="7"/>`))
	if err != nil {
		t.Fatal(err)
	}
	cfg, warnings, err := spec.Check(n, "t")
	if err != nil || len(warnings) != 0 || parses != 1 {
		t.Fatalf("check: %v %v, %d parses", warnings, err, parses)
	}
	if files := spec.Files(cfg); len(files) != 1 || files[0] != "report.7" {
		t.Errorf("files of the typed config: %v", files)
	}
	if cfg, _, _ := (Spec{}).Check(n, "t"); cfg != n {
		t.Errorf("without Parse the typed config is %v, want the node", cfg)
	}
	if _, err := ConfigOf[*config.Node](tagged{}); err == nil {
		t.Error("ConfigOf took a config of another type")
	}
}
