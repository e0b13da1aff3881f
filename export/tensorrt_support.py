"""What TensorRT's ONNX parser takes: the support matrix and the check that names each node.

``tensorrt_issues`` lists what the ONNX-TensorRT parser documents as unsupported (onnx-tensorrt
``docs/operators.md`` for TensorRT 10.15, opsets 9..24; TensorRT 11.x accepts up to opset 25):
operator types, non-default domains, opsets out of range, Q/DQ with a nonzero zero point,
dequantization of int32 (ONNX Runtime's bias quantization). Each issue names the node. It runs
without TensorRT or a GPU (onnx only).
"""

from __future__ import annotations

from typing import Any

from neuroedge.errors import ExportRefused

OPSET_RANGE = (9, 25)  # inclusive; 24 in TensorRT 10.15, 25 in 11.x
# ONNX TensorProto types TensorRT dequantizes: INT8, FLOAT8E4M3FN, INT4, FLOAT4E2M1.
QUANTIZED_TYPES = (3, 17, 22, 23)
# Listed "N" in onnx-tensorrt's operator support matrix (TensorRT 10.15).
UNSUPPORTED_OPS = frozenset(
    (
        "AffineGrid",
        "Bernoulli",
        "BitShift",
        "BitwiseAnd",
        "BitwiseNot",
        "BitwiseOr",
        "BitwiseXor",
        "CenterCropPad",
        "Col2Im",
        "Compress",
        "ConcatFromSequence",
        "ConvInteger",
        "DFT",
        "Det",
        "DynamicQuantizeLinear",
        "ImageDecoder",
        "MatMulInteger",
        "MaxRoiPool",
        "MaxUnpool",
        "MelWeightMatrix",
        "Multinomial",
        "NegativeLogLikelihoodLoss",
        "Optional",
        "OptionalGetElement",
        "OptionalHasElement",
        "QLinearConv",
        "QLinearMatMul",
        "RegexFullMatch",
        "SequenceAt",
        "SequenceConstruct",
        "SequenceEmpty",
        "SequenceErase",
        "SequenceInsert",
        "SequenceLength",
        "SequenceMap",
        "SoftmaxCrossEntropyLoss",
        "SplitToSequence",
        "StringConcat",
        "StringNormalizer",
        "StringSplit",
        "TfIdfVectorizer",
        "Unique",
    )
)


class TensorRTUnsupported(ExportRefused):
    """An ONNX graph TensorRT's parser cannot take; the message names each offending node."""


def tensorrt_issues(model: Any) -> list[str]:
    """Why TensorRT's ONNX parser would reject ``model``, one line per node; [] if nothing."""
    from onnx import numpy_helper

    issues = []
    for entry in model.opset_import:
        if entry.domain in ("", "ai.onnx") and not (
            OPSET_RANGE[0] <= entry.version <= OPSET_RANGE[1]
        ):
            issues.append(
                f"opset {entry.version} is outside TensorRT's {OPSET_RANGE[0]}..{OPSET_RANGE[1]}"
            )
    consts = {i.name: i for i in model.graph.initializer}
    for index, node in enumerate(model.graph.node):
        where = f"node {node.name or f'#{index}'!r} ({node.op_type})"
        if node.domain not in ("", "ai.onnx"):
            issues.append(f"{where}: domain {node.domain!r} needs a TensorRT plugin")
        elif node.op_type in UNSUPPORTED_OPS:
            issues.append(f"{where}: operator not supported by the TensorRT ONNX parser")
        source = consts.get(node.input[0]) if node.input else None
        if (
            node.op_type == "DequantizeLinear"
            and source is not None
            and source.data_type not in QUANTIZED_TYPES
        ):
            issues.append(
                f"{where}: dequantizes {node.input[0]!r} of ONNX type "
                f"{source.data_type}; TensorRT dequantizes int8/int4/fp8/fp4 only"
            )
        if node.op_type in ("QuantizeLinear", "DequantizeLinear") and len(node.input) > 2:
            zero = consts.get(node.input[2])
            if zero is not None and numpy_helper.to_array(zero).any():
                issues.append(
                    f"{where}: zero point {node.input[2]!r} is nonzero; TensorRT "
                    "takes symmetric quantization only"
                )
    return issues


def check_tensorrt_support(model: Any, where: str = "model") -> None:
    """Raise TensorRTUnsupported listing every issue ``tensorrt_issues`` finds."""
    issues = tensorrt_issues(model)
    if issues:
        raise TensorRTUnsupported(
            f"{where}: TensorRT cannot parse this graph:\n  " + "\n  ".join(issues)
        )
