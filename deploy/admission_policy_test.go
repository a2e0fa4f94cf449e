// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"bytes"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/plegkit/pleg/kubereport"
)

// admission-policy.yaml parses into two policies, each bound to deny, that
// match rbac.yaml's ServiceAccount and name pleg's condition. What they
// admit is tested against a real API server in test/kube.
func TestAdmissionPolicy(t *testing.T) {
	var sa corev1.ServiceAccount
	if err := yaml.UnmarshalStrict(bytes.Split(read(t, "rbac.yaml"), []byte("\n---\n"))[0], &sa); err != nil {
		t.Fatal(err)
	}
	user := "'system:serviceaccount:" + sa.Namespace + ":" + sa.Name + "'"
	docs := bytes.Split(read(t, "admission-policy.yaml"), []byte("\n---\n"))
	if len(docs) != 4 {
		t.Fatalf("admission-policy.yaml: %d documents, want two policies, each with its binding", len(docs))
	}
	for i := 0; i < len(docs); i += 2 {
		var policy admissionv1.ValidatingAdmissionPolicy
		var binding admissionv1.ValidatingAdmissionPolicyBinding
		if err := yaml.UnmarshalStrict(docs[i], &policy); err != nil {
			t.Fatalf("document %d: %v", i+1, err)
		}
		if err := yaml.UnmarshalStrict(docs[i+1], &binding); err != nil {
			t.Fatalf("document %d: %v", i+2, err)
		}
		if policy.Kind != "ValidatingAdmissionPolicy" || binding.Kind != "ValidatingAdmissionPolicyBinding" ||
			binding.Spec.PolicyName != policy.Name || len(binding.Spec.ValidationActions) != 1 ||
			binding.Spec.ValidationActions[0] != admissionv1.Deny {
			t.Errorf("%s: %s %s bound by %s to %s with %v, want denied", policy.Name, policy.Kind, policy.Name,
				binding.Kind, binding.Spec.PolicyName, binding.Spec.ValidationActions)
		}
		if policy.Spec.FailurePolicy == nil || *policy.Spec.FailurePolicy != admissionv1.Fail {
			t.Errorf("%s: a policy that fails must refuse, not admit", policy.Name)
		}
		if len(policy.Spec.MatchConditions) != 1 || !strings.Contains(policy.Spec.MatchConditions[0].Expression, user) {
			t.Errorf("%s: match conditions %+v, want %s, rbac.yaml's ServiceAccount", policy.Name, policy.Spec.MatchConditions, user)
		}
	}
	if !bytes.Contains(docs[0], []byte("'"+string(kubereport.ConditionType)+"'")) {
		t.Errorf("the node status policy does not name pleg's condition, %s", kubereport.ConditionType)
	}
}
