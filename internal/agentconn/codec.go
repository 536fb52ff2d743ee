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

func (codec) Unmarshal(data []byte, v any) error {
	switch m := v.(type) {
	case vtMessage:
		return m.UnmarshalVT(data)
	case proto.Message:
		return proto.Unmarshal(data, m)
	}
	return fmt.Errorf("agent codec: cannot unmarshal into %T", v)
}

// heavyAnswerBytes is the size from which slotCodec decodes an answer
// inside a slot: a process answer of a few thousand processes is hundreds
// of kilobytes and milliseconds of CPU, while a small message costs less
// than waiting for a slot would.
const heavyAnswerBytes = 64 << 10

// slotCodec is Codec that decodes an answer of heavyAnswerBytes or more
// inside one of its slots.
type slotCodec struct {
	codec
	slots cpuslots.Slots
}

func (c slotCodec) Unmarshal(data []byte, v any) error {
	if len(data) >= heavyAnswerBytes {
		c.slots.Acquire()
		defer c.slots.Release()
	}
	return c.codec.Unmarshal(data, v)
}
