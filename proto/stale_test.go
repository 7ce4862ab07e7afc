package controlpb

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nicstack/nicstack/internal/testutil"
)

// TestGeneratedCodeIsCurrent regenerates the gRPC code of every .proto here the way `make
// proto` does, into a temporary folder, and fails when a committed file differs or is missing.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	testutil.RequireCommand(t, "protoc")
	tool := func(name string) string {
		out, err := exec.Command("go", "tool", "-n", name).Output()
		if err != nil {
			t.Fatalf("go tool -n %s: %v", name, err)
		}
		return strings.TrimSpace(string(out))
	}
	protos, err := filepath.Glob("*.proto")
	if err != nil || len(protos) == 0 {
		t.Fatalf("no .proto files: %v", err)
	}
	const module = "module=github.com/nicstack/nicstack/proto"
	dir := t.TempDir()
	cmd := exec.Command("protoc", append([]string{"-I", ".",
		"--plugin=protoc-gen-go=" + tool("protoc-gen-go"),
		"--plugin=protoc-gen-go-grpc=" + tool("protoc-gen-go-grpc"),
		"--go_out=" + dir, "--go_opt=" + module,
		"--go-grpc_out=" + dir, "--go-grpc_opt=" + module}, protos...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("protoc: %v\n%s", err, out)
	}
	generated := 0
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		generated++
		rel, _ := filepath.Rel(dir, path)
		want, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if got, err := os.ReadFile(rel); err != nil || !bytes.Equal(got, want) {
			t.Errorf("proto/%s is stale or missing: run `make proto` and commit the result", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if generated < 2*len(protos) {
		t.Errorf("protoc made %d files of %d .proto files, want two each", generated, len(protos))
	}
}
