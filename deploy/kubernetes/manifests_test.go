// Package kubernetes holds boxer's Kubernetes manifests; its test decodes
// them strictly into the Kubernetes API's own types and enforces the rules
// README.md lists. It is a module apart, so that the server does not
// depend on the Kubernetes API packages.
package kubernetes

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// image is the name deploy/image/build.sh's image has once test/container
// copies it into Podman's store; the Deployment must run that one.
const image = "localhost/boxer:latest"

// allowedCaps are the capabilities a boxer container may add, each needed
// (deployment.yaml says why; test/container runs with only these).
var allowedCaps = []corev1.Capability{"SYS_ADMIN", "SETUID", "SETGID", "DAC_OVERRIDE"}

// manifests is every object of the folder, decoded.
type manifests struct {
	cm     *corev1.ConfigMap
	secret *corev1.Secret
	deploy *appsv1.Deployment
	svc    *corev1.Service
	pdb    *policyv1.PodDisruptionBudget
	hpa    *autoscalingv2.HorizontalPodAutoscaler
	netpol *networkingv1.NetworkPolicy
	text   map[string]string // file name → its text
}

// kustomization is the one file that is no Kubernetes object.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
}

// load decodes each file kustomization.yaml names, strictly: a field the
// API type does not have, or a key given twice, fails (rule 1).
func load(t *testing.T) manifests {
	t.Helper()
	var k kustomization
	b, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	files, _ := filepath.Glob("*.yaml")
	files = slices.DeleteFunc(files, func(f string) bool { return f == "kustomization.yaml" })
	if got, want := slices.Sorted(slices.Values(k.Resources)), files; !slices.Equal(got, want) {
		t.Fatalf("kustomization.yaml lists %v; the folder has %v", got, want)
	}
	m := manifests{text: map[string]string{}}
	// kinds makes the object a kind decodes into, in its place in m.
	kinds := map[string]func() any{
		"v1 ConfigMap":                           func() any { m.cm = new(corev1.ConfigMap); return m.cm },
		"v1 Secret":                              func() any { m.secret = new(corev1.Secret); return m.secret },
		"apps/v1 Deployment":                     func() any { m.deploy = new(appsv1.Deployment); return m.deploy },
		"v1 Service":                             func() any { m.svc = new(corev1.Service); return m.svc },
		"policy/v1 PodDisruptionBudget":          func() any { m.pdb = new(policyv1.PodDisruptionBudget); return m.pdb },
		"autoscaling/v2 HorizontalPodAutoscaler": func() any { m.hpa = new(autoscalingv2.HorizontalPodAutoscaler); return m.hpa },
		"networking.k8s.io/v1 NetworkPolicy":     func() any { m.netpol = new(networkingv1.NetworkPolicy); return m.netpol },
	}
	seen := map[string]bool{}
	for _, f := range k.Resources {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		m.text[f] = string(b)
		if bytes.Contains(b, []byte("\n---")) {
			t.Fatalf("%s: one object a file", f)
		}
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal(b, &head); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		kind := head.APIVersion + " " + head.Kind
		decode, ok := kinds[kind]
		if !ok {
			t.Fatalf("%s: unexpected %s", f, kind)
		}
		if seen[kind] {
			t.Fatalf("%s: a second %s", f, kind)
		}
		seen[kind] = true
		obj := decode()
		if err := yaml.UnmarshalStrict(b, obj); err != nil {
			t.Fatalf("%s: strict decoding into the API type: %v", f, err)
		}
	}
	if len(seen) != len(kinds) {
		t.Fatalf("want one each of %v; got %v", slices.Sorted(maps.Keys(kinds)), slices.Sorted(maps.Keys(seen)))
	}
	return m
}

// TestStrictDecoding is rule 1 alone, so that a typo fails with its name.
func TestStrictDecoding(t *testing.T) { load(t) }

// Rule 1 must catch what it claims: an unknown field, a duplicate key.
func TestStrictDecodingRefuses(t *testing.T) {
	for _, bad := range []string{
		"apiVersion: v1\nkind: Service\nspec:\n  selectr: {a: b}\n",
		"apiVersion: v1\nkind: Service\nspec:\n  type: ClusterIP\n  type: NodePort\n",
	} {
		if err := yaml.UnmarshalStrict([]byte(bad), &corev1.Service{}); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

// Rule 2: the pod's privileges.
func TestPodPrivileges(t *testing.T) {
	m := load(t)
	pod := m.deploy.Spec.Template.Spec
	if pod.HostUsers == nil || *pod.HostUsers {
		t.Error("hostUsers: want false (a user namespace of the pod's own)")
	}
	if pod.HostNetwork || pod.HostPID || pod.HostIPC {
		t.Error("host network, PID or IPC namespace shared")
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Error("automountServiceAccountToken: want false")
	}
	for _, v := range pod.Volumes {
		if v.HostPath != nil {
			t.Errorf("volume %s: a hostPath", v.Name)
		}
	}
	podSeccomp := pod.SecurityContext != nil && pod.SecurityContext.SeccompProfile != nil
	if len(pod.Containers) != 1 || len(pod.InitContainers) != 0 {
		t.Fatalf("want one container, got %d (+%d init)", len(pod.Containers), len(pod.InitContainers))
	}
	c := pod.Containers[0]
	sc := c.SecurityContext
	if sc == nil {
		t.Fatal("container: no securityContext")
	}
	if sc.Privileged == nil || *sc.Privileged {
		t.Error("privileged: want false, said")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("allowPrivilegeEscalation: want false")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("readOnlyRootFilesystem: want true")
	}
	if sc.RunAsUser != nil && *sc.RunAsUser == 0 && (pod.HostUsers == nil || *pod.HostUsers) {
		t.Error("root outside a pod user namespace")
	}
	if sc.ProcMount == nil || *sc.ProcMount != corev1.UnmaskedProcMount {
		t.Error("procMount: want Unmasked (the runtime's masks refuse a sandbox its /proc)")
	}
	seccomp := sc.SeccompProfile
	if seccomp == nil && podSeccomp {
		seccomp = pod.SecurityContext.SeccompProfile
	}
	if seccomp == nil || seccomp.Type == corev1.SeccompProfileTypeUnconfined {
		t.Errorf("seccomp: want a profile, not Unconfined (%v)", seccomp)
	}
	if sc.AppArmorProfile == nil {
		t.Error("appArmorProfile: want it said")
	}
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Error("capabilities.drop: want [ALL]")
	} else {
		for _, c := range sc.Capabilities.Add {
			if !slices.Contains(allowedCaps, c) {
				t.Errorf("capability %s: not one boxer needs (%v)", c, allowedCaps)
			}
		}
	}
	if c.Image != image {
		t.Errorf("image %q, want %q (deploy/image/build.sh's)", c.Image, image)
	}
}

// Rule 3: every privilege is justified in a comment beside it: the field's
// line follows a comment line that starts "# security:" or continues one.
func TestPrivilegesJustified(t *testing.T) {
	m := load(t)
	lines := strings.Split(m.text["deployment.yaml"], "\n")
	for _, field := range []string{"hostUsers:", "automountServiceAccountToken:", "seccompProfile:", "runAsUser:",
		"privileged:", "readOnlyRootFilesystem:", "procMount:", "appArmorProfile:", "drop:"} {
		found := false
		for i, l := range lines {
			if strings.TrimSpace(l) != field && !strings.HasPrefix(strings.TrimSpace(l), field+" ") {
				continue
			}
			found = true
			justified := false
			for j := i - 1; j >= 0 && strings.HasPrefix(strings.TrimSpace(lines[j]), "#"); j-- {
				justified = justified || strings.HasPrefix(strings.TrimSpace(lines[j]), "# security:")
			}
			if !justified {
				t.Errorf("deployment.yaml:%d: %s has no \"# security:\" comment above it", i+1, field)
			}
		}
		if !found {
			t.Errorf("deployment.yaml: no %s", field)
		}
	}
}

// Rule 4: readiness, liveness and the drain.
func TestProbesAndDrain(t *testing.T) {
	m := load(t)
	pod := m.deploy.Spec.Template.Spec
	c := pod.Containers[0]
	probe := func(name string, p *corev1.Probe, path string) {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path || p.HTTPGet.Port.String() != c.Ports[0].Name {
			t.Errorf("%s probe: want GET %s on port %s", name, path, c.Ports[0].Name)
		}
	}
	probe("readiness", c.ReadinessProbe, "/readyz")
	probe("liveness", c.LivenessProbe, "/healthz")
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
		t.Fatal("preStop: want a pause while endpoints drop the pod")
	}
	grace, err := time.ParseDuration(m.cm.Data["BOXER_SHUTDOWN_GRACE"])
	if err != nil {
		t.Fatalf("BOXER_SHUTDOWN_GRACE: %v", err)
	}
	need := time.Duration(c.Lifecycle.PreStop.Sleep.Seconds)*time.Second + grace + 5*time.Second
	if pod.TerminationGracePeriodSeconds == nil || time.Duration(*pod.TerminationGracePeriodSeconds)*time.Second < need {
		t.Errorf("terminationGracePeriodSeconds: want at least %v (preStop + BOXER_SHUTDOWN_GRACE + 5 s)", need)
	}
	if s := m.deploy.Spec.Strategy.RollingUpdate; s == nil || s.MaxUnavailable == nil || s.MaxUnavailable.IntValue() != 0 {
		t.Error("rolling update: want maxUnavailable 0 (a new pod is ready before an old one drains)")
	}
}

// Rule 5: requests and limits, and room in the limit for what boxer runs.
func TestResources(t *testing.T) {
	m := load(t)
	c := m.deploy.Spec.Template.Spec.Containers[0]
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, okr := c.Resources.Requests[r]
		lim, okl := c.Resources.Limits[r]
		if !okr || !okl {
			t.Errorf("%s: want a request and a limit", r)
		} else if req.Cmp(lim) > 0 {
			t.Errorf("%s: request %s over limit %s", r, req.String(), lim.String())
		}
	}
	slots, err := strconv.Atoi(m.cm.Data["BOXER_SLOTS"])
	if err != nil {
		t.Fatalf("BOXER_SLOTS: %v", err)
	}
	// Each slot's run up to /v1/exec's and /v1/run-python's default
	// memory (512 MiB), and the warm pool's zygotes (boxer serve's
	// defaults: one with the pre-imports, a lean one, one for each of the
	// two own lanes, 1 GiB each), with room left over for sessions and
	// boxer itself.
	zygotes, zygoteMiB := 4, 1024
	if v, ok := m.cm.Data["BOXER_POOL_OWN_LANE"]; ok {
		zygotes = 2 + len(strings.FieldsFunc(v, func(r rune) bool { return r == ',' }))
	}
	if v, ok := m.cm.Data["BOXER_POOL_ZYGOTE_MEMORY"]; ok {
		n, err := strconv.Atoi(strings.TrimSuffix(v, "MiB"))
		if err != nil || !strings.HasSuffix(v, "MiB") {
			t.Fatalf("BOXER_POOL_ZYGOTE_MEMORY %q: want a number of MiB", v)
		}
		zygoteMiB = n
	}
	need := resource.MustParse(fmt.Sprintf("%dMi", slots*512+zygotes*zygoteMiB+1024))
	if lim := c.Resources.Limits[corev1.ResourceMemory]; lim.Cmp(need) < 0 {
		t.Errorf("memory limit %s: %d slots, %d zygotes of %d MiB and 1 GiB to spare need %s", lim.String(), slots, zygotes, zygoteMiB, need.String())
	}
}

// Rule 6: every setting names a real boxer serve variable; secrets are in
// the Secret; the database is shared; the sandboxes' ids fit the pod.
func TestSettings(t *testing.T) {
	m := load(t)
	known := serveVariables(t)
	c := m.deploy.Spec.Template.Spec.Containers[0]
	names := map[string]string{}
	for k := range m.cm.Data {
		names[k] = "configmap.yaml"
	}
	for k := range m.secret.StringData {
		names[k] = "secret.yaml"
	}
	for _, e := range c.Env {
		names[e.Name] = "deployment.yaml"
	}
	for n, f := range names {
		if strings.HasPrefix(n, "BOXER_") && !known[n] {
			t.Errorf("%s: %s is no variable of boxer serve", f, n)
		}
		secret := n == "BOXER_DATABASE" || strings.HasSuffix(n, "_SECRET") || strings.HasSuffix(n, "_AUTH_HEADER") || strings.HasSuffix(n, "_KEY")
		if secret && f != "secret.yaml" {
			t.Errorf("%s: %s is a secret", f, n)
		}
	}
	if db := m.secret.StringData["BOXER_DATABASE"]; !strings.HasPrefix(db, "postgres://") {
		t.Errorf("BOXER_DATABASE %q: every pod must share one Postgres", db)
	}
	base, err1 := strconv.ParseUint(m.cm.Data["BOXER_ID_BASE"], 10, 32)
	span, err2 := strconv.ParseUint(m.cm.Data["BOXER_ID_SPAN"], 10, 32)
	if err1 != nil || err2 != nil {
		t.Fatalf("BOXER_ID_BASE, BOXER_ID_SPAN: %v %v", err1, err2)
	}
	// A pod's user namespace maps 0-65535; 0 is boxer, 65534 is the
	// overflow id. The span's rules are the engine's (sandbox.Config).
	if base < 1 || base+span > 65534 || span < 4096 || span%16 != 0 {
		t.Errorf("ids %d+%d: want within 1-65533, a span of at least 4096, a multiple of 16", base, span)
	}
	var adv *corev1.EnvVar
	for i := range c.Env {
		if c.Env[i].Name == "BOXER_ADVERTISE" {
			adv = &c.Env[i]
		}
	}
	if adv == nil || adv.Value != fmt.Sprintf("$(POD_IP):%d", c.Ports[0].ContainerPort) {
		t.Error("BOXER_ADVERTISE: want $(POD_IP) and the container port, where other nodes forward sessions' calls")
	}
}

// serveVariables runs boxer serve -h from the repository and collects
// the BOXER_* variables its flags name.
func serveVariables(t *testing.T) map[string]bool {
	t.Helper()
	cmd := exec.Command("go", "run", "./cmd/boxer", "serve", "-h")
	cmd.Dir = "../.."
	out, _ := cmd.CombinedOutput() // -h exits 0 or 2 by flag package version
	vars := map[string]bool{}
	for _, m := range regexp.MustCompile(`\((BOXER_[A-Z0-9_]+)\)`).FindAllStringSubmatch(string(out), -1) {
		vars[m[1]] = true
	}
	if len(vars) < 20 {
		t.Fatalf("boxer serve -h named %d variables:\n%s", len(vars), out)
	}
	return vars
}

// Rule 7: the Service, the budget, the autoscaler and the policy all
// select the Deployment's pods; the budget never stops them all.
func TestSelectors(t *testing.T) {
	m := load(t)
	podLabels := labels.Set(m.deploy.Spec.Template.Labels)
	if sel := m.deploy.Spec.Selector; sel == nil || !labels.SelectorFromSet(sel.MatchLabels).Matches(podLabels) {
		t.Error("the Deployment's selector misses its own pods")
	}
	if !labels.SelectorFromSet(m.svc.Spec.Selector).Matches(podLabels) || len(m.svc.Spec.Selector) == 0 {
		t.Error("the Service does not select the pods")
	}
	if m.svc.Spec.Ports[0].TargetPort.String() != m.deploy.Spec.Template.Spec.Containers[0].Ports[0].Name {
		t.Error("the Service's target port is not the container's")
	}
	if sel := m.pdb.Spec.Selector; sel == nil || !labels.SelectorFromSet(sel.MatchLabels).Matches(podLabels) {
		t.Error("the PodDisruptionBudget does not select the pods")
	}
	if !labels.SelectorFromSet(m.netpol.Spec.PodSelector.MatchLabels).Matches(podLabels) {
		t.Error("the NetworkPolicy does not select the pods")
	}
	if r := m.hpa.Spec.ScaleTargetRef; r.Kind != "Deployment" || r.Name != m.deploy.Name {
		t.Errorf("the autoscaler scales %s %s", r.Kind, r.Name)
	}
	if m.hpa.Spec.MinReplicas == nil || *m.hpa.Spec.MinReplicas < 2 {
		t.Error("autoscaler: want at least 2 replicas (one node's drain leaves one serving)")
	}
	if u := m.pdb.Spec.MaxUnavailable; u == nil || u.IntValue() != 1 {
		t.Error("PodDisruptionBudget: want maxUnavailable 1")
	}
}

// Rule 8: boxer pods reach Postgres, the facilitator, each other and DNS,
// nothing else: every egress rule names its peers and ports, none is the
// whole internet.
func TestEgress(t *testing.T) {
	m := load(t)
	np := m.netpol.Spec
	if !slices.Contains(np.PolicyTypes, networkingv1.PolicyTypeEgress) {
		t.Fatal("policyTypes: want Egress")
	}
	peers := 0
	for i, r := range np.Egress {
		if len(r.To) == 0 || len(r.Ports) == 0 {
			t.Errorf("egress rule %d: want peers and ports (an empty list allows all)", i)
		}
		for _, p := range r.To {
			peers++
			if p.IPBlock != nil {
				if ones := prefixLen(p.IPBlock.CIDR); ones < 8 {
					t.Errorf("egress rule %d: %s is too wide", i, p.IPBlock.CIDR)
				}
			}
		}
	}
	self := false
	for _, r := range np.Egress {
		for _, p := range r.To {
			if p.PodSelector != nil && p.NamespaceSelector == nil && labels.SelectorFromSet(p.PodSelector.MatchLabels).Matches(labels.Set(m.deploy.Spec.Template.Labels)) {
				self = slices.ContainsFunc(r.Ports, func(np networkingv1.NetworkPolicyPort) bool {
					return np.Port != nil && np.Port.IntValue() == int(m.deploy.Spec.Template.Spec.Containers[0].Ports[0].ContainerPort)
				})
			}
		}
	}
	if !self {
		t.Error("egress: other boxer pods' API port must be allowed (sessions are forwarded to their node)")
	}
	if peers == 0 {
		t.Error("egress: nothing allowed at all (boxer needs its database)")
	}
}

func prefixLen(cidr string) int {
	i := strings.IndexByte(cidr, '/')
	if i < 0 {
		return 0
	}
	n, _ := strconv.Atoi(cidr[i+1:])
	return n
}
