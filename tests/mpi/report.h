/*
 * Output and checking helpers shared by the MPI test programs. Plain MPI C:
 * the programs build with Open MPI's mpicc and with chorus-mpicc, and ctest
 * compares what they print.
 *
 * Every rank records lines with say() and checks with expect(); at the end
 * report_finish() sends each rank's lines to rank 0 (MPI_Send/MPI_Recv),
 * which prints them in rank order as "[rank] line", followed by the number
 * of checks that failed on any rank. Only deterministic values are printed.
 */
#ifndef CHORUS_TESTS_MPI_REPORT_H
#define CHORUS_TESTS_MPI_REPORT_H

#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REPORT_CAPACITY (1 << 17)
static char report_lines[REPORT_CAPACITY];
static int report_used = 0;
static int report_checks = 0;
static int report_failures = 0;
static int report_rank = -1;

#if defined(__GNUC__)
#define REPORT_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define REPORT_PRINTF(a, b)
#endif

static void report_vappend(const char* prefix, const char* format, va_list args) {
  int room = REPORT_CAPACITY - report_used;
  int written = snprintf(report_lines + report_used, (size_t)room, "%s", prefix);
  if (written > 0 && written < room) report_used += written;
  room = REPORT_CAPACITY - report_used;
  written = vsnprintf(report_lines + report_used, (size_t)room, format, args);
  if (written > 0 && written < room - 1) {
    report_used += written;
    report_lines[report_used++] = '\n';
    report_lines[report_used] = '\0';
  }
}

/* The name of the error class of `code` (an error code, or a class), for
 * printing: both MPIs print the same names. */
static inline const char* report_class_name(int code) {
  int error_class = code;
  if (MPI_Error_class(code, &error_class) != MPI_SUCCESS) return "(MPI_Error_class failed)";
  switch (error_class) {
#define REPORT_CLASS(name) \
  case name:               \
    return #name;
    REPORT_CLASS(MPI_SUCCESS) REPORT_CLASS(MPI_ERR_BUFFER) REPORT_CLASS(MPI_ERR_COUNT) REPORT_CLASS(MPI_ERR_TYPE)
    REPORT_CLASS(MPI_ERR_TAG) REPORT_CLASS(MPI_ERR_COMM) REPORT_CLASS(MPI_ERR_RANK) REPORT_CLASS(MPI_ERR_REQUEST)
    REPORT_CLASS(MPI_ERR_ROOT) REPORT_CLASS(MPI_ERR_GROUP) REPORT_CLASS(MPI_ERR_OP) REPORT_CLASS(MPI_ERR_TOPOLOGY)
    REPORT_CLASS(MPI_ERR_DIMS) REPORT_CLASS(MPI_ERR_ARG) REPORT_CLASS(MPI_ERR_UNKNOWN) REPORT_CLASS(MPI_ERR_TRUNCATE)
    REPORT_CLASS(MPI_ERR_OTHER) REPORT_CLASS(MPI_ERR_INTERN) REPORT_CLASS(MPI_ERR_IN_STATUS)
    REPORT_CLASS(MPI_ERR_PENDING) REPORT_CLASS(MPI_ERR_KEYVAL) REPORT_CLASS(MPI_ERR_NO_MEM)
    REPORT_CLASS(MPI_ERR_UNSUPPORTED_OPERATION)
#undef REPORT_CLASS
    default: return "another error class";
  }
}

/* Records one output line of this rank. */
static void say(const char* format, ...) REPORT_PRINTF(1, 2);
static void say(const char* format, ...) {
  va_list args;
  va_start(args, format);
  report_vappend("", format, args);
  va_end(args);
}

/* Counts a check; a failed one is recorded as a "FAILED: ..." line. */
static void expect(int ok, const char* format, ...) REPORT_PRINTF(2, 3);
static void expect(int ok, const char* format, ...) {
  ++report_checks;
  if (ok) return;
  ++report_failures;
  va_list args;
  va_start(args, format);
  report_vappend("FAILED: ", format, args);
  va_end(args);
}

static void print_lines(int rank, const char* lines) {
  const char* line = lines;
  while (*line != '\0') {
    const char* end = strchr(line, '\n');
    int length = end != NULL ? (int)(end - line) : (int)strlen(line);
    printf("[%d] %.*s\n", rank, length, line);
    line += length + (end != NULL ? 1 : 0);
  }
}

/* Prints every rank's lines at rank 0; returns the number of failed checks
 * on all ranks (the same value on every rank). */
static int report_finish(MPI_Comm comm) {
  int rank, size, failures = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  report_rank = rank;
  say("%d checks", report_checks);
  if (rank != 0) {
    MPI_Send(&report_used, 1, MPI_INT, 0, 900, comm);
    MPI_Send(report_lines, report_used, MPI_CHAR, 0, 901, comm);
  } else {
    static char incoming[REPORT_CAPACITY + 1];
    print_lines(0, report_lines);
    for (int r = 1; r < size; ++r) {
      int length = 0, received = -1;
      MPI_Status status;
      MPI_Recv(&length, 1, MPI_INT, r, 900, comm, MPI_STATUS_IGNORE);
      MPI_Recv(incoming, REPORT_CAPACITY, MPI_CHAR, r, 901, comm, &status);
      MPI_Get_count(&status, MPI_CHAR, &received);
      if (received != length) printf("FAILED: rank %d sent %d bytes of report but %d arrived\n", r, length, received);
      incoming[received > 0 ? received : 0] = '\0';
      print_lines(r, incoming);
    }
  }
  MPI_Allreduce(&report_failures, &failures, 1, MPI_INT, MPI_SUM, comm);
  if (rank == 0) printf("checks failed on any rank: %d\n", failures);
  fflush(stdout);
  return failures;
}

/* Every rank's own pass line, "PROGRAM: rank R passed", printed after
 * MPI_Finalize when no check failed on any rank: the test requires one from
 * each rank (compare.sh, tests/job_verdict.py), so a rank that crashed or
 * hung in MPI_Finalize, or never got there, fails it. */
static inline void report_passed(const char* program, int failures) {
  if (failures == 0 && report_rank >= 0) printf("%s: rank %d passed\n", program, report_rank);
  fflush(stdout);
}

#endif /* CHORUS_TESTS_MPI_REPORT_H */
