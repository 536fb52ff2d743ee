// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package agentconn

import (
	"fmt"

	"google.golang.org/grpc/encoding"
	"google.golang.org/protobuf/proto"

	"github.com/gpotel/gpotel/internal/cpuslots"
)

// Codec is the agents' wire codec: protobuf, marshalled and unmarshalled by
// a message's generated code (vtprotobuf's MarshalVT, UnmarshalVT) when it
// has it, by protobuf-go's reflection otherwise. The wire format is the
// same either way.
var Codec encoding.Codec = codec{}

type codec struct{}

// vtMessage is a message with vtprotobuf's generated code.
type vtMessage interface {
	MarshalVT() ([]byte, error)
	UnmarshalVT([]byte) error
}

func (codec) Name() string { return "proto" }

func (codec) Marshal(v any) ([]byte, error) {
	switch m := v.(type) {
	case vtMessage:
		return m.MarshalVT()
	case proto.Message:
		return proto.Marshal(m)
	}
	return nil, fmt.Errorf("agent codec: cannot marshal %T", v)
}

// heavyAnswerBytes is the size from which decoding an answer takes a
// pipeline CPU slot: a process answer of a few thousand processes is
// hundreds of kilobytes and milliseconds of CPU, while small messages
// (a memory-context answer, a health reply) are decoded at once, so an
// API call that asks an agent never waits behind a tick.
const heavyAnswerBytes = 64 << 10

func (codec) Unmarshal(data []byte, v any) error {
	if len(data) >= heavyAnswerBytes {
		cpuslots.Pipeline.Acquire()
		defer cpuslots.Pipeline.Release()
	}
	switch m := v.(type) {
	case vtMessage:
		return m.UnmarshalVT(data)
	case proto.Message:
		return proto.Unmarshal(data, m)
	}
	return fmt.Errorf("agent codec: cannot unmarshal into %T", v)
}
