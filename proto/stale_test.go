package controlpb

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nicstack/nicstack/internal/testutil"
)

// TestGeneratedCodeIsCurrent regenerates the gRPC code the way `make proto` does, into a
// temporary folder, and fails when the committed files differ.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	testutil.RequireCommand(t, "protoc")
	tool := func(name string) string {
		out, err := exec.Command("go", "tool", "-n", name).Output()
		if err != nil {
			t.Fatalf("go tool -n %s: %v", name, err)
		}
		return strings.TrimSpace(string(out))
	}
	dir := t.TempDir()
	cmd := exec.Command("protoc", "-I", ".",
		"--plugin=protoc-gen-go="+tool("protoc-gen-go"),
		"--plugin=protoc-gen-go-grpc="+tool("protoc-gen-go-grpc"),
		"--go_out="+dir, "--go_opt=paths=source_relative",
		"--go-grpc_out="+dir, "--go-grpc_opt=paths=source_relative",
		"control.proto")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("protoc: %v\n%s", err, out)
	}
	for _, f := range []string{"control.pb.go", "control_grpc.pb.go"} {
		want, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("proto/%s is stale: run `make proto` and commit the result", f)
		}
	}
}
