// kernprof: GPU time by kernel for any CUDA program, on machines without nsys/ncu. A CUPTI
// injection library: the CUDA driver loads it when CUDA_INJECTION64_PATH names it and calls
// InitializeInjection; at exit it writes a markdown table (and optionally CSV). See README.md.
// Build (CUDA_HOME=/usr/local/cuda; bench/kernprof/kernprof.sh finds CUPTI and builds it itself):
//   g++ -O2 -shared -fPIC -std=c++17 bench/kernprof/kernprof.cpp -I$CUDA_HOME/include
//   $CUDA_HOME/lib64/libcupti.so -Wl,-rpath,$CUDA_HOME/lib64 -o /tmp/libkernprof.so
#include <cupti_activity.h>
#include <cxxabi.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <unistd.h>

// The records come from whatever libcupti is loaded at run time, which may be older than these
// headers. We read only name/start/end, whose offsets have not moved since Kernel4 (CUDA 9);
// CUpti_ActivityKernel10 is the newest typedef in the CUDA 13.0 headers.
using KernelRecord = CUpti_ActivityKernel10;
static_assert(offsetof(KernelRecord, start) == offsetof(CUpti_ActivityKernel4, start));
static_assert(offsetof(KernelRecord, end) == offsetof(CUpti_ActivityKernel4, end));
static_assert(offsetof(KernelRecord, name) == offsetof(CUpti_ActivityKernel4, name));
static_assert(offsetof(CUpti_ActivityMemcpy6, start) == offsetof(CUpti_ActivityMemcpy, start));
static_assert(offsetof(CUpti_ActivityMemset4, start) == offsetof(CUpti_ActivityMemset, start));

namespace {

constexpr size_t kBufferBytes = 8 << 20;

struct Stat {
  uint64_t total_ns = 0;
  uint64_t calls = 0;
};

// One GPU activity's interval, for the idle-time section (where the GPU waits for the host).
struct Span {
  uint64_t start, end;
  const std::string* name;  // the by_name key (unordered_map keys do not move)
};
constexpr size_t kMaxSpans = size_t{8} << 20;  // 8 M intervals, 192 MB at most

// Process-wide by necessity: CUPTI's callbacks carry no user pointer, and the report runs from
// atexit. Buffers complete on CUPTI's worker thread, hence the mutex.
struct State {
  std::mutex mu;
  std::unordered_map<std::string, Stat> by_name;  // raw (mangled) name -> totals
  std::vector<Span> spans;
  uint64_t dropped = 0;
  bool reported = false;
  pid_t pid = 0;  // a forked child inherits atexit; only the process that injected reports
} g;

void check(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return;
  const char* s = "?";
  cuptiGetResultString(r, &s);
  fprintf(stderr, "kernprof: %s failed: %s\n", what, s);
}

const char* memcpy_name(uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "[memcpy HtoD]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "[memcpy DtoH]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "[memcpy DtoD]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "[memcpy HtoH]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "[memcpy PtoP]";
    default: return "[memcpy other]";
  }
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(aligned_alloc(ACTIVITY_RECORD_ALIGNMENT, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;  // size 0 tells CUPTI to drop records, not crash
  *max_records = 0;                    // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t,
                               size_t valid) {
  std::lock_guard<std::mutex> lock(g.mu);
  CUpti_Activity* rec = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    const char* name = nullptr;
    uint64_t start = 0, end = 0;
    if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ||
        rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      auto* k = reinterpret_cast<KernelRecord*>(rec);
      name = k->name ? k->name : "[unnamed kernel]", start = k->start, end = k->end;
    } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      auto* m = reinterpret_cast<CUpti_ActivityMemcpy6*>(rec);
      name = memcpy_name(m->copyKind), start = m->start, end = m->end;
    } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
      auto* m = reinterpret_cast<CUpti_ActivityMemset4*>(rec);
      name = "[memset]", start = m->start, end = m->end;
    } else {
      continue;
    }
    auto it = g.by_name.try_emplace(name).first;
    Stat& s = it->second;
    s.total_ns += end > start ? end - start : 0;
    s.calls += 1;
    if (g.spans.size() < kMaxSpans && end > start) g.spans.push_back({start, end, &it->first});
  }
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS)
    g.dropped += dropped;
  free(buffer);
}

std::string demangle(const std::string& raw) {
  int status = 0;
  char* d = abi::__cxa_demangle(raw.c_str(), nullptr, nullptr, &status);
  std::string out = (status == 0 && d) ? d : raw;
  free(d);
  return out;
}

std::string short_name(const std::string& raw) {
  std::string n = raw[0] == '[' ? raw : demangle(raw);
  if (n.size() > 60) n = n.substr(0, 57) + "...";
  std::string cell;
  for (char c : n) c == '|' ? cell += "\\|" : cell += c;
  return cell;
}

// Where the GPU had nothing to run between its first and last activity: the busy time (the union
// of all intervals), the idle gaps by size, and the largest gaps with what ran before and after
// (a gap between two kernels of one decode is host time per launch or a synchronisation).
std::string idle_section(size_t top) {
  if (g.spans.empty()) return "";
  std::sort(g.spans.begin(), g.spans.end(), [](const Span& a, const Span& b) { return a.start < b.start; });
  const uint64_t first = g.spans.front().start;
  uint64_t busy_end = g.spans.front().end, busy = 0, cur = first;
  const std::string* last = g.spans.front().name;
  struct Gap {
    uint64_t ns;
    const std::string *before, *after;
    uint64_t at;
  };
  std::vector<Gap> gaps;
  const uint64_t edges[] = {10'000, 100'000, 1'000'000, 10'000'000};  // 10 us, 100 us, 1 ms, 10 ms
  uint64_t count[5] = {}, sum[5] = {};
  for (const Span& sp : g.spans) {
    if (sp.start > busy_end) {
      busy += busy_end - cur;
      const uint64_t gap = sp.start - busy_end;
      int b = 0;
      while (b < 4 && gap >= edges[b]) ++b;
      count[b] += 1, sum[b] += gap;
      gaps.push_back({gap, last, sp.name, busy_end - first});
      cur = sp.start;
    }
    if (sp.end > busy_end) busy_end = sp.end, last = sp.name;
  }
  busy += busy_end - cur;
  const uint64_t span = busy_end - first;
  char line[512];
  snprintf(line, sizeof line,
           "\n## GPU idle between its first and last activity\n\n%.3f ms from first to last, busy %.3f ms, "
           "idle %.3f ms in %zu gaps%s\n\n| gap | count | idle ms |\n| --- | ---: | ---: |\n",
           span / 1e6, busy / 1e6, (span - busy) / 1e6, gaps.size(),
           g.spans.size() == kMaxSpans ? " (interval store full: the rest uncounted)" : "");
  std::string md = line;
  const char* label[] = {"< 10 us", "10-100 us", "0.1-1 ms", "1-10 ms", ">= 10 ms"};
  for (int b = 0; b < 5; ++b) {
    snprintf(line, sizeof line, "| %s | %llu | %.3f |\n", label[b], (unsigned long long)count[b], sum[b] / 1e6);
    md += line;
  }
  std::sort(gaps.begin(), gaps.end(), [](const Gap& a, const Gap& b) { return a.ns > b.ns; });
  md += "\n| gap ms | at ms | before | after |\n| ---: | ---: | --- | --- |\n";
  for (size_t i = 0; i < gaps.size() && i < std::min<size_t>(top, 15); ++i) {
    snprintf(line, sizeof line, "| %.3f | %.3f | ", gaps[i].ns / 1e6, gaps[i].at / 1e6);
    md += line + short_name(*gaps[i].before) + " | " + short_name(*gaps[i].after) + " |\n";
  }
  return md;
}

// Writes PATH.tmp.PID, then renames: a reader never sees half a report.
bool write_file(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  FILE* f = fopen(tmp.c_str(), "w");
  bool ok = f && fwrite(text.data(), 1, text.size(), f) == text.size();
  ok = f && fclose(f) == 0 && ok;
  if (ok) ok = rename(tmp.c_str(), path.c_str()) == 0;
  if (!ok) fprintf(stderr, "kernprof: cannot write %s\n", path.c_str()), remove(tmp.c_str());
  return ok;
}

void report() {
  if (getpid() != g.pid) return;
  check(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
  std::lock_guard<std::mutex> lock(g.mu);
  if (g.reported) return;
  g.reported = true;
  struct Row {
    std::string name;
    Stat s;
  };
  std::vector<Row> rows;
  uint64_t total = 0, kernel_total = 0, kernels = 0;  // names in [] are memcpy/memset
  for (auto& [raw, s] : g.by_name) {
    bool pseudo = raw[0] == '[';
    rows.push_back({pseudo ? raw : demangle(raw), s});
    total += s.total_ns;
    if (!pseudo) kernel_total += s.total_ns, kernels += 1;
  }
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    return a.s.total_ns != b.s.total_ns ? a.s.total_ns > b.s.total_ns : a.name < b.name;
  });
  const char* top_env = getenv("KERNPROF_TOP");
  size_t top = top_env ? strtoul(top_env, nullptr, 10) : 25;

  char line[512];
  snprintf(line, sizeof line,
           "kernel time %.3f ms in %llu distinct kernels (+ %.3f ms memcpy/memset; sums of "
           "durations, overlapping work counted twice)%s\n\n",
           kernel_total / 1e6, (unsigned long long)kernels, (total - kernel_total) / 1e6,
           g.dropped ? ", RECORDS DROPPED" : "");
  std::string md = line;
  if (g.dropped) md += std::to_string(g.dropped) + " activity records dropped: totals are low\n\n";
  md += "| share | total ms | calls | mean us | kernel |\n| ---: | ---: | ---: | ---: | --- |\n";
  for (size_t i = 0; i < rows.size() && i < top; ++i) {
    const Row& r = rows[i];
    std::string name = r.name.size() > 110 ? r.name.substr(0, 107) + "..." : r.name;
    std::string cell;  // a '|' in a name (operator|) would split the markdown row
    for (char c : name) c == '|' ? cell += "\\|" : cell += c;
    snprintf(line, sizeof line, "| %.1f%% | %.3f | %llu | %.2f | ",
             100.0 * r.s.total_ns / std::max<uint64_t>(total, 1), r.s.total_ns / 1e6,
             (unsigned long long)r.s.calls, r.s.total_ns / 1e3 / r.s.calls);
    md += line + cell + " |\n";
  }
  if (rows.size() > top)
    md += "\n(" + std::to_string(rows.size() - top) +
          " more rows: raise KERNPROF_TOP or set KERNPROF_CSV)\n";

  md += idle_section(top);

  const char* out = getenv("KERNPROF_OUT");
  if (out && *out)
    write_file(out, md);
  else
    fputs(md.c_str(), stderr);
  if (const char* csv_path = getenv("KERNPROF_CSV"); csv_path && *csv_path) {
    std::string csv = "name,total_ns,calls\n";
    for (const Row& r : rows) {
      std::string q = "\"";  // templates put commas in names: quote, double any quote
      for (char c : r.name) c == '"' ? q += "\"\"" : q += c;
      csv += q + "\"," + std::to_string(r.s.total_ns) + "," + std::to_string(r.s.calls) + "\n";
    }
    write_file(csv_path, csv);
  }
}

}  // namespace

// Called by the CUDA driver (once per process) when CUDA_INJECTION64_PATH names this library.
// CONCURRENT_KERNEL, unlike KERNEL, does not serialise the program's kernels.
extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
  check(r, "cuptiActivityRegisterCallbacks");
  if (r != CUPTI_SUCCESS) return 0;
  for (auto kind : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                    CUPTI_ACTIVITY_KIND_MEMSET})
    check(cuptiActivityEnable(kind), "cuptiActivityEnable");
  g.pid = getpid();
  atexit(report);
  return 1;
}
