#!/usr/bin/env python3
"""Writes the calls of the undefined-tensor sweep in tests/test_errors.cpp, made from the headers at
build time, so that a function or method added to them is swept without anyone editing the test.

usage: undefined_calls.py functions OUTPUT SOURCE_ROOT HEADER...
  One call per public function of the headers that takes a tensor, every tensor argument undefined:
  each must raise an ember::Error, never crash.
usage: undefined_calls.py methods OUTPUT SOURCE_ROOT
  One call per public member of Tensor (tensor/tensor.h) and per method that a function of
  tensor/ops.h taking a tensor first must have (see METHODLESS), on an undefined tensor: each must
  raise UndefinedTensorError naming the member. A missing method fails the build.

Declarations are read as ember's headers write them: one statement at namespace level, from its
return type to ';' (in the class, an inline body ends it too). Templates, class bodies and inline
definitions at namespace level are skipped. Each non-tensor parameter gets its type's
value-initialised value (Scalar: 0), so overloads resolve exactly.
"""
import re
import sys

TENSOR_TYPES = {"const Tensor&", "Tensor&", "const std::vector<Tensor>&"}
# The functions of tensor/ops.h with a tensor first that have no Tensor method (tensor/tensor.h says why).
METHODLESS = {"zeros_like", "ones_like", "full_like", "result_type", "where", "std"}
# Tensor's members that need no tensor behind the handle.
HANDLE_MEMBERS = {"Tensor", "defined", "impl", "is_same", "use_count", "str", "empty"}


def strip_comments(text):
    """The text without comments and preprocessor lines."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r"^\s*#[^\n]*", "", text, flags=re.M)


def split_top(params):
    """Splits a parameter list at the commas outside <>, (), {} and []."""
    parts, depth, cur = [], 0, ""
    for ch in params:
        if ch in "<({[":
            depth += 1
        elif ch in ">)}]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def param_type(param):
    """The type of 'const Shape& dims = {}' ('const Shape&'): the text before the name."""
    decl = param.split("=", 1)[0].strip()
    m = re.match(r"^(.*?[\s&*>])([A-Za-z_]\w*)$", decl)
    return (m.group(1) if m else decl).strip()


def argument(ptype, lvalues):
    if ptype == "const Tensor&":
        return "Tensor()"
    if ptype == "Tensor&":
        lvalues.append(f"u{len(lvalues)}")
        return lvalues[-1]
    if ptype == "const std::vector<Tensor>&":
        return "std::vector<Tensor>{Tensor(), Tensor()}"
    bare = re.sub(r"^const\s+", "", ptype).rstrip("&").strip()
    if bare == "Scalar":
        return "Scalar(0)"
    if bare.endswith("*"):
        return f"static_cast<{bare}>(nullptr)"
    return f"{bare}{{}}"


def declarations(text):
    """(namespace, statement) for each statement at namespace level."""
    out, stack, depth, i, stmt = [], [], 0, 0, ""
    namespace_depths = []
    while i < len(text):
        m = re.match(r"namespace\s+([\w:]+)\s*\{", text[i:])
        if m and depth == len(namespace_depths) and stmt.strip() == "":
            stack.append(m.group(1))
            namespace_depths.append(depth)
            depth += 1
            i += m.end()
            continue
        ch = text[i]
        if depth == len(namespace_depths) and stmt.count("(") > stmt.count(")"):
            stmt += ch  # inside a parameter list: braces are default values
            i += 1
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if namespace_depths and depth == namespace_depths[-1]:
                namespace_depths.pop()
                stack.pop()
                stmt = ""
                i += 1
                continue
        if depth == len(namespace_depths):
            if ch == ";":
                out.append(("::".join(stack), stmt.strip()))
                stmt = ""
            elif ch != "}":
                stmt += ch
            else:
                stmt = ""  # the end of a class body or an inline definition
        i += 1
    return out


DECLARATION = re.compile(r"^([\w:<>,\s&*]+?)\s*\b([a-z_]\w*)\((.*)\)\s*(const)?$")


def functions(path, root):
    """(namespace, name, parameter types) of each function declared in the header."""
    text = strip_comments(open(f"{root}/{path}").read())
    for namespace, stmt in declarations(text):
        stmt = " ".join(stmt.split())
        if stmt.startswith(("template", "using", "class", "struct", "enum", "inline", "#")) or "(" not in stmt:
            continue
        m = DECLARATION.match(stmt)
        if m:
            yield namespace, m.group(2), [param_type(p) for p in split_top(m.group(3))]


def calls(path, root):
    for namespace, name, types in functions(path, root):
        if not any(t in TENSOR_TYPES for t in types):
            continue
        lvalues = []
        args = ", ".join(argument(t, lvalues) for t in types)
        # The function's namespace opened, for the types it declares (nn::init::FanMode).
        setup = f"using namespace {namespace}; " + "".join(f"Tensor {u}; " for u in lvalues)
        label = f"{path}: {name}({', '.join(types)})"
        yield f'{{"{label}", [] {{ {setup}(void){namespace}::{name}({args}); }}}},'


def class_members(text):
    """The statements of class Tensor's public part: declarations, inline bodies dropped."""
    body = text[text.index("class Tensor {") :]
    body = body[body.index("{") + 1 : body.index(" private:")]
    out, cur, depth = [], "", 0
    for ch in body:
        if depth > 0:
            depth += {"{": 1, "}": -1}.get(ch, 0)
        elif ch == "{" and cur.count("(") == cur.count(")") and ")" in cur:
            out.append(cur)  # an inline body follows
            cur, depth = "", 1
        elif ch == ";":
            out.append(cur)
            cur = ""
        else:
            cur += ch
    return [" ".join(re.sub(r"^\s*public:", "", c).split()) for c in out]


def member_call(name, types):
    lvalues = []
    args = ", ".join(argument(t, lvalues) for t in types)
    return f'{{"{name}", [](Tensor& u) {{ (void)u.{name}({args}); }}}},'


def method_calls(root):
    text = strip_comments(open(f"{root}/tensor/tensor.h").read())
    for stmt in class_members(text):
        if stmt.startswith(("template", "static", "using", "explicit")) or "(" not in stmt:
            continue
        m = re.match(r"^(.*?)\b([a-z_]\w*)\((.*)\)\s*(const)?\s*(override)?$", stmt.split(" : ")[0])
        if m and m.group(2) not in HANDLE_MEMBERS:
            yield member_call(m.group(2), [param_type(p) for p in split_top(m.group(3))])
    for _, name, types in functions("tensor/ops.h", root):
        if types and types[0] in ("const Tensor&", "Tensor&") and name not in METHODLESS:
            yield member_call(name, types[1:])


def main():
    mode, output, root = sys.argv[1:4]
    lines = list(method_calls(root)) if mode == "methods" else [line for h in sys.argv[4:] for line in calls(h, root)]
    with open(output, "w") as f:
        f.write(f"// Generated by tools/undefined_calls.py {mode} from the headers.\n")
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
