#!/usr/bin/python3
"""The status table of docs/mpi.md, generated from the code.

Every MPI-3.1 collective, group, communicator, datatype, process topology
and info function (the standard's chapters 4, 5, 6, 7 and 9, listed below) gets its status from the
sources, not from anyone's memory:

  supported      defined in src/front/mpi/*.cc outside unsupported.cc and
                 declared in the "Working functions" part of
                 include/chorus/mpi/mpi.h
  declared only  defined in unsupported.cc (returns
                 MPI_ERR_UNSUPPORTED_OPERATION naming itself) and declared
                 in the "Declared only" part of mpi.h
  not declared   in neither: a program using it does not compile

The reason given for each refused family is the one written below.

  mpi_table.py --check SOURCE_DIR   exit 1, saying what differs, when the
                                    table in docs/mpi.md is not what the
                                    code gives, or mpi.h and the sources
                                    disagree on a function
  mpi_table.py --write SOURCE_DIR   rewrite the table in docs/mpi.md
"""
import argparse
import re
import sys
from pathlib import Path

# MPI-3.1, by chapter and family: (family, reason when refused, functions).
FAMILIES = [
    ("collectives (5)", "", [
        "MPI_Barrier", "MPI_Bcast", "MPI_Gather", "MPI_Gatherv", "MPI_Scatter", "MPI_Scatterv", "MPI_Allgather",
        "MPI_Allgatherv", "MPI_Alltoall", "MPI_Alltoallv", "MPI_Alltoallw", "MPI_Reduce", "MPI_Allreduce",
        "MPI_Reduce_local", "MPI_Reduce_scatter_block", "MPI_Reduce_scatter", "MPI_Scan", "MPI_Exscan",
        "MPI_Op_create", "MPI_Op_free", "MPI_Op_commutative"]),
    ("non-blocking collectives (5.12)", "", [
        "MPI_Ibarrier", "MPI_Ibcast", "MPI_Igather", "MPI_Igatherv", "MPI_Iscatter", "MPI_Iscatterv",
        "MPI_Iallgather", "MPI_Iallgatherv", "MPI_Ialltoall", "MPI_Ialltoallv", "MPI_Ialltoallw", "MPI_Ireduce",
        "MPI_Iallreduce", "MPI_Ireduce_scatter_block", "MPI_Ireduce_scatter", "MPI_Iscan", "MPI_Iexscan"]),
    ("groups (6.3)", "groups are not implemented yet (issue 44)", [
        "MPI_Group_size", "MPI_Group_rank", "MPI_Group_translate_ranks", "MPI_Group_compare", "MPI_Comm_group",
        "MPI_Group_union", "MPI_Group_intersection", "MPI_Group_difference", "MPI_Group_incl", "MPI_Group_excl",
        "MPI_Group_range_incl", "MPI_Group_range_excl", "MPI_Group_free"]),
    ("communicators (6.4)", "MPI_Comm_idup is not implemented: chorus agrees on a context id with one collective over the parent, and an agreement left in flight could meet a communicator another call creates meanwhile with the same id (docs/mpi.md, Differences)", [
        "MPI_Comm_size", "MPI_Comm_rank", "MPI_Comm_compare", "MPI_Comm_dup", "MPI_Comm_dup_with_info",
        "MPI_Comm_idup", "MPI_Comm_create", "MPI_Comm_create_group", "MPI_Comm_split", "MPI_Comm_split_type",
        "MPI_Comm_free", "MPI_Comm_set_info", "MPI_Comm_get_info"]),
    ("intercommunicators (6.6)", "chorus communicators are intracommunicators only", [
        "MPI_Comm_test_inter", "MPI_Comm_remote_size", "MPI_Comm_remote_group", "MPI_Intercomm_create",
        "MPI_Intercomm_merge"]),
    ("attributes and names (6.7, 6.8)", "", [
        "MPI_Comm_create_keyval", "MPI_Comm_free_keyval", "MPI_Comm_set_attr", "MPI_Comm_get_attr",
        "MPI_Comm_delete_attr", "MPI_Type_create_keyval", "MPI_Type_free_keyval", "MPI_Type_set_attr",
        "MPI_Type_get_attr", "MPI_Type_delete_attr", "MPI_Comm_set_name", "MPI_Comm_get_name",
        "MPI_Type_set_name", "MPI_Type_get_name"]),
    ("datatype constructors (4.1)", "subarray and darray layouts are not implemented yet", [
        "MPI_Type_contiguous", "MPI_Type_vector", "MPI_Type_create_hvector", "MPI_Type_indexed",
        "MPI_Type_create_hindexed", "MPI_Type_create_indexed_block", "MPI_Type_create_hindexed_block",
        "MPI_Type_create_struct", "MPI_Type_create_subarray", "MPI_Type_create_darray", "MPI_Type_create_resized",
        "MPI_Type_dup", "MPI_Type_commit", "MPI_Type_free"]),
    ("datatype queries and addresses (4.1)", "element counts of a status and type decoding (envelope, contents) are not implemented yet", [
        "MPI_Get_address", "MPI_Aint_add", "MPI_Aint_diff", "MPI_Type_size", "MPI_Type_size_x",
        "MPI_Type_get_extent", "MPI_Type_get_extent_x", "MPI_Type_get_true_extent", "MPI_Type_get_true_extent_x",
        "MPI_Get_elements", "MPI_Get_elements_x", "MPI_Type_get_envelope", "MPI_Type_get_contents"]),
    ("packing (4.2, 4.3)", "explicit packing is not implemented (chorus packs internally)", [
        "MPI_Pack", "MPI_Unpack", "MPI_Pack_size", "MPI_Pack_external", "MPI_Unpack_external",
        "MPI_Pack_external_size"]),
]

FAMILIES.append(("info objects (9)", "", [
    "MPI_Info_create", "MPI_Info_set", "MPI_Info_delete", "MPI_Info_get", "MPI_Info_get_valuelen",
    "MPI_Info_get_nkeys", "MPI_Info_get_nthkey", "MPI_Info_dup", "MPI_Info_free"]))
FAMILIES.append(("process topologies (7)", "the non-blocking neighbourhood collectives are not implemented", [
    "MPI_Dims_create", "MPI_Cart_create", "MPI_Cart_get", "MPI_Cartdim_get", "MPI_Cart_rank", "MPI_Cart_coords",
    "MPI_Cart_shift", "MPI_Cart_sub", "MPI_Cart_map", "MPI_Topo_test", "MPI_Graph_create", "MPI_Graphdims_get",
    "MPI_Graph_get", "MPI_Graph_neighbors_count", "MPI_Graph_neighbors", "MPI_Graph_map",
    "MPI_Dist_graph_create_adjacent", "MPI_Dist_graph_create", "MPI_Dist_graph_neighbors_count",
    "MPI_Dist_graph_neighbors", "MPI_Neighbor_allgather", "MPI_Neighbor_allgatherv", "MPI_Neighbor_alltoall",
    "MPI_Neighbor_alltoallv", "MPI_Neighbor_alltoallw", "MPI_Ineighbor_allgather", "MPI_Ineighbor_allgatherv",
    "MPI_Ineighbor_alltoall", "MPI_Ineighbor_alltoallv", "MPI_Ineighbor_alltoallw"]))

# MPI-4.0's large-count forms of the collectives (MPI_Count counts, MPI_Aint
# displacements; chapter 6 of MPI-4.0), declared in mpi_large_count.h.
LARGE_COUNT = ["MPI_Bcast", "MPI_Gather", "MPI_Gatherv", "MPI_Scatter", "MPI_Scatterv", "MPI_Allgather",
               "MPI_Allgatherv", "MPI_Alltoall", "MPI_Alltoallv", "MPI_Alltoallw", "MPI_Reduce", "MPI_Allreduce",
               "MPI_Reduce_local", "MPI_Reduce_scatter_block", "MPI_Reduce_scatter", "MPI_Scan", "MPI_Exscan"]
FAMILIES.append(("large-count collectives (MPI-4.0 6.x, `_c`)", "", [
    n + "_c" for n in LARGE_COUNT] + ["MPI_I" + n[4:].lower() + "_c" for n in LARGE_COUNT if n != "MPI_Reduce_local"]))

BEGIN = "<!-- mpi-table: generated by tests/mpi/mpi_table.py --write; do not edit by hand -->"
END = "<!-- mpi-table: end -->"


def header_sections(header):
    """Function names declared in mpi.h's working part (with mpi_large_count.h, which it includes) and its
    declared-only part."""
    text = header.read_text()
    split = text.index("Declared only:")
    declared = re.compile(r"^\w[\w ]*?\b(MPI_\w+)\(", re.M)
    working = set(declared.findall(text[:split])) - {"MPI_User_function", "MPI_Comm_errhandler_function",
                                                      "MPI_Comm_copy_attr_function", "MPI_Comm_delete_attr_function",
                                                      "MPI_Type_copy_attr_function", "MPI_Type_delete_attr_function"}
    working |= set(declared.findall((header.parent / "mpi_large_count.h").read_text()))
    return working, set(declared.findall(text[split:]))


def defined_functions(source):
    """Functions defined in src/front/mpi: (outside unsupported.cc, in unsupported.cc)."""
    definition = re.compile(r"^(?:int|double|MPI_Aint) (MPI_\w+)\(", re.M)
    real, refused = set(), set()
    for path in sorted((source / "src/front/mpi").glob("*.cc")):
        names = set(definition.findall(path.read_text()))
        (refused if path.name == "unsupported.cc" else real).update(names)
    return real, refused


def disagreements(source):
    working, declared_only = header_sections(source / "include/chorus/mpi/mpi.h")
    real, refused = defined_functions(source)
    problems = []
    for name in sorted(working - real):
        problems.append(f"{name} is declared as working in mpi.h but not defined outside unsupported.cc")
    for name in sorted(declared_only - refused):
        problems.append(f"{name} is declared-only in mpi.h but unsupported.cc does not define it")
    for name in sorted(real - working):
        problems.append(f"{name} is defined in src/front/mpi but not declared in mpi.h's working part")
    for name in sorted(refused - declared_only):
        problems.append(f"{name} is refused in unsupported.cc but not declared in mpi.h's declared-only part")
    return problems, working & real, declared_only & refused


def table(source):
    _, supported, refused = disagreements(source)
    lines = [BEGIN, "", "| family (MPI-3.1 section) | supported | refused: declared, returns MPI_ERR_UNSUPPORTED_OPERATION | not declared | why refused |",
             "|---|---|---|---|---|"]
    totals = [0, 0, 0]
    for family, reason, names in FAMILIES:
        columns = [[n for n in names if n in supported], [n for n in names if n in refused],
                   [n for n in names if n not in supported and n not in refused]]
        for i, column in enumerate(columns):
            totals[i] += len(column)
        cells = [", ".join(f"`{n}`" for n in column) or "—" for column in columns]
        why = reason if columns[1] or columns[2] else "—"
        lines.append(f"| {family} | {cells[0]} | {cells[1]} | {cells[2]} | {why} |")
    lines += ["", f"In these families: {totals[0]} supported, {totals[1]} declared only, {totals[2]} not declared.",
              "", END]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="fail if docs/mpi.md or mpi.h disagree with the code")
    mode.add_argument("--write", action="store_true", help="rewrite the table in docs/mpi.md")
    parser.add_argument("source", type=Path, help="the chorus source directory")
    args = parser.parse_args()
    doc_path = args.source / "docs/mpi.md"
    doc = doc_path.read_text()
    if BEGIN not in doc or END not in doc:
        print(f"mpi_table: FAILED: {doc_path} has no generated table (markers missing)")
        return 1
    start, stop = doc.index(BEGIN), doc.index(END) + len(END)
    wanted = table(args.source)
    problems, _, _ = disagreements(args.source)
    if args.write:
        doc_path.write_text(doc[:start] + wanted + doc[stop:])
        print(f"mpi_table: wrote the table in {doc_path}")
    elif doc[start:stop] != wanted:
        problems.append(f"the table in {doc_path} is not what the code gives; run tests/mpi/mpi_table.py --write .")
    # The "Declared only" section's count.
    _, all_refused = defined_functions(args.source)
    said = re.search(r"These (\d+) functions compile and link", doc)
    if not said or int(said.group(1)) != len(all_refused):
        problems.append(f"{doc_path} says {said.group(1) if said else 'no number of'} declared-only functions; "
                        f"unsupported.cc has {len(all_refused)}")
    # The functions the "Declared only" section lists are those unsupported.cc refuses.
    section = doc[doc.index("## Declared only"):]
    section = section[:section.index("\n## ", 1)] if "\n## " in section[1:] else section
    listed = set(re.findall(r"`(MPI_\w+)`", section.split("\n\n", 2)[-1].split("\n\nAnything not in")[0]))
    for name in sorted(listed - all_refused):
        problems.append(f"{doc_path}'s Declared only section lists {name}, which unsupported.cc does not refuse")
    for name in sorted(all_refused - listed):
        problems.append(f"{doc_path}'s Declared only section does not list {name}, which unsupported.cc refuses")
    for problem in problems:
        print(f"mpi_table: FAILED: {problem}")
    if problems:
        return 1
    print(f"mpi_table: docs/mpi.md's table, mpi.h and src/front/mpi agree ({wanted.count('`') // 2} names)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
