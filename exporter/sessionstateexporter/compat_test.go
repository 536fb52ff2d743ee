// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionstateexporter

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/viewtest"
	"github.com/gpotel/gpotel/internal/statustest"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// descriptorsOverReflection asks the server's reflection service for the file
// that defines symbol, with its dependencies, as a client without generated
// code would.
func descriptorsOverReflection(t *testing.T, conn *grpc.ClientConn, symbol string) *protoregistry.Files {
	t.Helper()
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctxTimeout(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stream.CloseSend() }()
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: symbol},
	}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	fdr := resp.GetFileDescriptorResponse()
	if fdr == nil {
		t.Fatalf("reflection answered %v", resp.GetErrorResponse())
	}
	set := &descriptorpb.FileDescriptorSet{}
	for _, raw := range fdr.FileDescriptorProto {
		fd := &descriptorpb.FileDescriptorProto{}
		if err := proto.Unmarshal(raw, fd); err != nil {
			t.Fatal(err)
		}
		set.File = append(set.File, fd)
	}
	files, err := protodesc.NewFiles(set)
	if err != nil {
		t.Fatalf("descriptors from reflection do not resolve: %v", err)
	}
	return files
}

// field reads a field by its .proto name.
func field(m protoreflect.Message, name string) protoreflect.Value {
	fd := m.Descriptor().Fields().ByName(protoreflect.Name(name))
	if fd == nil {
		panic("no field " + name + " in " + string(m.Descriptor().FullName()))
	}
	return m.Get(fd)
}

// descriptorsFromProtoFiles compiles proto/yagpcc/*.proto with protoc, as a
// client in another language would start from the .proto files.
func descriptorsFromProtoFiles(t *testing.T) *protoregistry.Files {
	t.Helper()
	protoc, err := exec.LookPath("protoc")
	if err != nil {
		t.Skip("protoc not installed (Debian's protobuf-compiler; make test installs it)")
	}
	out := filepath.Join(t.TempDir(), "yagpcc.pb")
	protoDir := filepath.Join("..", "..", "proto")
	sources, err := filepath.Glob(filepath.Join(protoDir, "yagpcc", "*.proto"))
	if err != nil || len(sources) == 0 {
		t.Fatalf("no .proto files under %s: %v", protoDir, err)
	}
	args := []string{"-I", protoDir, "--include_imports", "--descriptor_set_out=" + out}
	for _, src := range sources {
		rel, _ := filepath.Rel(protoDir, src)
		args = append(args, rel)
	}
	if msg, err := exec.Command(protoc, args...).CombinedOutput(); err != nil {
		t.Fatalf("protoc: %v\n%s", err, msg)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	set := &descriptorpb.FileDescriptorSet{}
	if err := proto.Unmarshal(raw, set); err != nil {
		t.Fatal(err)
	}
	files, err := protodesc.NewFiles(set)
	if err != nil {
		t.Fatalf("descriptors from the .proto files do not resolve: %v", err)
	}
	return files
}

func TestForeignClientDecodesAnswersFromReflectedDescriptors(t *testing.T) {
	srv := startForeignClientFixture(t)
	conn := dial(t, srv.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	checkForeignClient(t, conn, descriptorsOverReflection(t, conn, "yagpcc.GetGPInfo"))
}

func TestForeignClientDecodesAnswersFromProtoFiles(t *testing.T) {
	srv := startForeignClientFixture(t)
	conn := dial(t, srv.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	checkForeignClient(t, conn, descriptorsFromProtoFiles(t))
}

func startForeignClientFixture(t *testing.T) *testServer {
	srv := startDefault(t)
	second := fullSession()
	second.sessID = 43
	second.last.user = 9.5
	srv.consume(t, buildSnapshot(t0, []testSession{fullSession(), second}))
	return srv
}

// checkForeignClient calls GetGPSessions with messages built from files
// alone and reads the answer by field name.
func checkForeignClient(t *testing.T, conn *grpc.ClientConn, files *protoregistry.Files) {
	t.Helper()
	sd, err := files.FindDescriptorByName("yagpcc.GetGPInfo")
	if err != nil {
		t.Fatal(err)
	}
	method := sd.(protoreflect.ServiceDescriptor).Methods().ByName("GetGPSessions")
	req := dynamicpb.NewMessage(method.Input())
	req.Set(req.Descriptor().Fields().ByName("page_size"), protoreflect.ValueOfInt64(1))
	sortList := req.Mutable(req.Descriptor().Fields().ByName("field")).List()
	wrapper := sortList.NewElement().Message()
	fieldEnum := wrapper.Descriptor().Fields().ByName("field_name").Enum()
	orderEnum := wrapper.Descriptor().Fields().ByName("order").Enum()
	wrapper.Set(wrapper.Descriptor().Fields().ByName("field_name"),
		protoreflect.ValueOfEnum(fieldEnum.Values().ByName("LAST_USERTIMESECONDS").Number()))
	wrapper.Set(wrapper.Descriptor().Fields().ByName("order"),
		protoreflect.ValueOfEnum(orderEnum.Values().ByName("SORT_DESC").Number()))
	sortList.Append(protoreflect.ValueOfMessage(wrapper))

	resp := dynamicpb.NewMessage(method.Output())
	if err := conn.Invoke(ctxTimeout(t), "/yagpcc.GetGPInfo/GetGPSessions", req, resp); err != nil {
		t.Fatal(err)
	}
	states := field(resp, "sessions_state").List()
	if states.Len() != 1 || field(resp, "next_page_token").String() == "" {
		t.Fatalf("want one session and a next page, got %d", states.Len())
	}
	state := states.Get(0).Message()
	key := field(state, "session_key").Message()
	if got := field(key, "sess_id").Int(); got != 43 {
		t.Fatalf("sorted by last user time descending, first sess_id %d, want 43", got)
	}
	info := field(state, "session_info").Message()
	if got := field(info, "application_name").String(); got != "psql" {
		t.Fatalf("application_name %q", got)
	}
	if got := field(info, "wait_event").String(); got != "relation" {
		t.Fatalf("gpotel's wait_event %q", got)
	}
	stat := field(field(state, "last_metrics").Message(), "systemStat").Message()
	for name, want := range map[string]float64{
		"userTimeSeconds": 9.5, "kernelTimeSeconds": 0.25, "runningTimeSeconds": 9.75,
		"window_seconds": 299.5, "run_delay_seconds": 0.0625,
	} {
		if got := field(stat, name).Float(); got != want {
			t.Errorf("last_metrics.systemStat.%s = %v, want %v", name, got, want)
		}
	}
	for name, want := range map[string]uint64{"read_bytes": 4096, "rss": 300 << 20, "rss_max_host": 150 << 20, "minor_faults": 300} {
		if got := field(stat, name).Uint(); got != want {
			t.Errorf("last_metrics.systemStat.%s = %v, want %v", name, got, want)
		}
	}
	if !field(stat, "partial").Bool() || field(stat, "processes").Uint() != 9 {
		t.Errorf("partial/processes not decoded: %v %v", field(stat, "partial"), field(stat, "processes"))
	}
	if got := field(field(state, "running_query_info").Message(), "query_text").String(); got != "select count(*) from t" {
		t.Errorf("running_query_info.query_text %q", got)
	}
}

// Every service the server offers (as its reflection lists them, actions
// on) reports SERVING to the health service, and so does the server.
func TestHealthReportsEveryServiceServing(t *testing.T) {
	cfg := testConfig()
	cfg.Actions.Enabled = true
	cfg.Actions.Host, cfg.Actions.Database, cfg.Actions.User = "127.0.0.1", "postgres", testActionRole
	cfg.Actions.TokenFile = viewtest.ActionTokenFile(t, viewtest.ActionToken)
	srv := startServer(t, cfg, nopHost())

	stream, err := reflectionpb.NewServerReflectionClient(srv.conn).ServerReflectionInfo(ctxTimeout(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{ListServices: "*"}}); err != nil {
		t.Fatal(err)
	}
	listed, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	services := []string{""}
	for _, s := range listed.GetListServicesResponse().GetService() {
		if !strings.HasPrefix(s.GetName(), "grpc.") { // health and reflection themselves
			services = append(services, s.GetName())
		}
	}
	if len(services) < 7 {
		t.Fatalf("reflection lists %v, want the API's six services", services)
	}
	h := healthpb.NewHealthClient(srv.conn)
	for _, service := range services {
		resp, err := h.Check(ctxTimeout(t), &healthpb.HealthCheckRequest{Service: service})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health %q: %v %v, want SERVING", service, resp.GetStatus(), err)
		}
	}
}

func TestShutdownStopsServing(t *testing.T) {
	srv := startDefault(t)
	if _, err := srv.client.GetTotalSessionsStat(ctxTimeout(t), &yagpcc.GetTotalSessionsReq{}); err != nil {
		t.Fatal(err)
	}
	if err := srv.exp.Shutdown(ctxTimeout(t)); err != nil {
		t.Fatal(err)
	}
	_, err := srv.client.GetTotalSessionsStat(ctxTimeout(t), &yagpcc.GetTotalSessionsReq{})
	statustest.AssertCode(t, err, codes.Unavailable, "")
}
