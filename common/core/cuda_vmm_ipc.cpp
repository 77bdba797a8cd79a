// IPC of CUDA VMM memory between processes of a node (efa_cuda_vmm_ipc.h).
#include "efa_cuda_vmm_ipc.h"

#include "efa_cuda_pointer.h"

#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rdma/fi_errno.h>

namespace {

// cuda.h's values (the driver API is not built against: the backend takes
// the calls from the driver Open MPI loaded).
constexpr int kBufferId = 7;       // CU_POINTER_ATTRIBUTE_BUFFER_ID
constexpr int kMempool = 17;       // CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE
constexpr int kDeviceOrdinal = 9;  // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
constexpr int kPosixFd = 1;        // CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
constexpr int kLocationDevice = 1; // CU_MEM_LOCATION_TYPE_DEVICE
constexpr int kReadWrite = 3;      // CU_MEM_ACCESS_FLAGS_PROT_READWRITE

// The most physical allocations one buffer may span and still go by IPC:
// each is held open as a descriptor while its message is in flight
// (PyTorch's expandable segments map 20 MiB allocations side by side, so
// buffers up to 5 GiB go).
constexpr uint32_t kMaxPieces = EFA_CUDA_VMM_MAX_PIECES;

// The allocation's name in efa_device_ipc_t.handle: what a receiver keeps
// its mapping under (the descriptor, which changes with every message, is
// in held, outside the name).
struct VmmName {
    char magic[8];
    uint64_t buffer_id;
};
static_assert(sizeof(VmmName) <= EFA_DEVICE_IPC_HANDLE_SIZE);
constexpr char kMagic[8] = "efacvmm";

// The name of a buffer that spans several allocations mapped side by
// side: their ids, in address order, so that a piece unmapped and another
// allocation mapped in its place gives another name.  Every id where
// there are at most kNamedIds pieces; past that the first kNamedIds - 1
// and a digest of them all (pieces_name).
constexpr uint32_t kNamedIds = 7;
struct PiecesName {
    char magic[4];
    uint32_t count;
    uint64_t buffer_id[kNamedIds];
};
static_assert(sizeof(PiecesName) == EFA_DEVICE_IPC_HANDLE_SIZE);
constexpr char kPiecesMagic[4] = {'e', 'f', 'a', 'p'};

// A 64-bit mix of the ids, in order (splitmix64's finalizer over each):
// two buffers of the same first ids differ in it unless their later ids
// collide in 64 bits.
uint64_t ids_digest(const uint64_t *ids, uint32_t count) {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ count;
    for (uint32_t i = 0; i < count; ++i) {
        h ^= ids[i];
        h += 0x9e3779b97f4a7c15ull;
        h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
        h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
        h ^= h >> 31;
    }
    return h;
}

PiecesName pieces_name(const uint64_t *ids, uint32_t count) {
    PiecesName name{};
    memcpy(name.magic, kPiecesMagic, sizeof(kPiecesMagic));
    name.count = count;
    const uint32_t kept = count <= kNamedIds ? count : kNamedIds - 1;
    memcpy(name.buffer_id, ids, kept * sizeof(uint64_t));
    if (count > kNamedIds) {
        name.buffer_id[kNamedIds - 1] = ids_digest(ids, count);
    }
    return name;
}

// What the receiver of such a buffer reads from the descriptor held for
// the message (a memfd of the sender's, sealed): a header, then for each
// piece its id, length and the number of the descriptor the sender
// exported it as (held open with the note).  The receiver only reads it,
// and only a sealed memfd of exactly that size, so a frame naming another
// of the sender's descriptors changes nothing in the sender and cannot
// stall the receiver on a file system; the ids give the name again, which
// is how the receiver knows the note is this message's.
struct NoteHeader {
    char magic[8];
    uint32_t count;
    uint32_t reserved;
};
struct NoteEntry {
    uint64_t buffer_id;
    uint64_t len;
    int32_t fd;
    uint32_t reserved;
};
size_t note_size(uint32_t count) {
    return sizeof(NoteHeader) + size_t{count} * sizeof(NoteEntry);
}
constexpr char kNoteMagic[8] = "efavmmn";
constexpr int kNoteSeals = F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE;

// One physical allocation under a buffer, as the sender found it.
struct Piece {
    efa_cu_ptr_t base;
    size_t len;
    uint64_t buffer_id;
    efa_cu_handle_t handle; // retained
};

std::mutex g_lock;
// (The maps below are never destroyed: a thread may still release an
// import or an export while another calls exit().)
// This process's mappings of other processes' allocations: each piece's
// length (cuMemUnmap takes one mapping at a time; cuMemAddressFree the
// whole range).
std::map<efa_cu_ptr_t, std::vector<size_t>> &g_mapped =
    *new std::map<efa_cu_ptr_t, std::vector<size_t>>();
// The pieces' descriptors an export holds, by its note's descriptor.
std::map<int, std::vector<int>> &g_held_pieces = *new std::map<int, std::vector<int>>();
// Descriptors held by exports in flight (notes included), at most a
// quarter of the process's soft RLIMIT_NOFILE: a buffer over many pieces
// holds one per piece until its message is done, and the rest of the
// process (sockets, files, the provider) must keep its descriptors.  An
// export beyond it is refused: that message streams.
size_t g_held_fds = 0;

size_t held_fds_budget() {
    struct rlimit r {};
    if (0 != getrlimit(RLIMIT_NOFILE, &r) || RLIM_INFINITY == r.rlim_cur) {
        return 4096;
    }
    return static_cast<size_t>(r.rlim_cur / 4);
}

// n descriptors of the budget, taken for an export and given back when
// it is released, or at once where the export fails (kept: false).
class HeldFds {
  public:
    explicit HeldFds(size_t n) : n_(n) {
        const size_t budget = held_fds_budget();
        std::lock_guard<std::mutex> guard(g_lock);
        taken_ = g_held_fds + n <= budget;
        g_held_fds += taken_ ? n : 0;
    }
    ~HeldFds() {
        if (taken_ && !kept_) {
            give_back(n_);
        }
    }
    HeldFds(const HeldFds &) = delete;
    HeldFds &operator=(const HeldFds &) = delete;
    bool taken() const { return taken_; }
    void keep() { kept_ = true; }
    static void give_back(size_t n) {
        std::lock_guard<std::mutex> guard(g_lock);
        g_held_fds -= n <= g_held_fds ? n : g_held_fds;
    }

  private:
    size_t n_;
    bool taken_ = false, kept_ = false;
};

// The allocation mapped at p (where a mapping must begin when first is
// false): its range, id and retained handle.  cuMemGetAddressRange names
// one mapping of VMM memory, not the reservation around it; a range that
// starts in another allocation (a driver naming the reservation) is
// refused, as the buffer's offset in the allocation is then unknown.  So
// is memory of a stream-ordered pool (cudaMallocAsync): it lies at some
// offset in one of the pool's chunks, which a retained handle would name
// from its start.  (A driver that cannot say: not a pool's.)
bool piece_at(const efa_cuda_vmm_calls_t *cu, efa_cu_ptr_t p, bool first, Piece *out) {
    unsigned long long id = 0;
    efa_cu_ptr_t base = 0;
    size_t size = 0;
    void *pool = nullptr;
    if (0 == cu->pointer_attribute(&pool, kMempool, p) && nullptr != pool) {
        return false;
    }
    if (0 != cu->pointer_attribute(&id, kBufferId, p) || 0 == id ||
        0 != cu->address_range(&base, &size, p) || p < base || p - base >= size ||
        (!first && base != p)) {
        return false;
    }
    efa_cu_handle_t h = 0, at_base = 0;
    if (0 != cu->retain(&h, reinterpret_cast<void *>(p))) {
        return false; // (not VMM memory)
    }
    bool one = base == p;
    if (!one && 0 == cu->retain(&at_base, reinterpret_cast<void *>(base))) {
        one = at_base == h;
        (void)cu->release(at_base);
    }
    if (!one) {
        (void)cu->release(h);
        return false;
    }
    // (keyed as the device backend keys it: efa_cuda_mix_block_id)
    unsigned long long block = 0;
    if (0 != cu->pointer_attribute(&block, EFA_CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID, p)) {
        block = 0;
    }
    *out = Piece{base, size, efa_cuda_mix_block_id(id, block), h};
    return true;
}

// The pieces under [p, p + len), retained, in address order; false (none
// retained) where one is not VMM memory, a gap or a range the driver does
// not name lies between, or there are more than kMaxPieces.
bool pieces_of(const efa_cuda_vmm_calls_t *cu, efa_cu_ptr_t p, size_t len,
               std::vector<Piece> *out) {
    const efa_cu_ptr_t end = p + len;
    efa_cu_ptr_t at = p;
    bool ok = end > p;
    while (ok && (out->empty() || at < end)) {
        Piece piece{};
        ok = out->size() < kMaxPieces && piece_at(cu, at, out->empty(), &piece);
        if (ok) {
            out->push_back(piece);
            at = piece.base + piece.len;
        }
    }
    if (!ok) {
        for (const Piece &piece : *out) {
            (void)cu->release(piece.handle);
        }
        out->clear();
    }
    return ok;
}

void close_all(const std::vector<int> &fds) {
    for (int fd : fds) {
        close(fd);
    }
}

// The note of a buffer over several pieces, in a sealed memfd: its
// descriptor, or -1.
int write_note(const std::vector<Piece> &pieces, const std::vector<int> &fds) {
    const auto count = static_cast<uint32_t>(pieces.size());
    std::vector<unsigned char> note;
    try {
        note.resize(note_size(count));
    } catch (const std::bad_alloc &) {
        return -1;
    }
    NoteHeader header{};
    memcpy(header.magic, kNoteMagic, sizeof(kNoteMagic));
    header.count = count;
    memcpy(note.data(), &header, sizeof(header));
    for (uint32_t i = 0; i < count; ++i) {
        const NoteEntry entry{pieces[i].buffer_id, pieces[i].len, fds[i], 0};
        memcpy(note.data() + note_size(i), &entry, sizeof(entry));
    }
    const int fd = memfd_create("efa-vmm-ipc", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd >= 0 && (note.size() != static_cast<size_t>(pwrite(fd, note.data(), note.size(), 0)) ||
                    0 != fcntl(fd, F_ADD_SEALS, kNoteSeals))) {
        close(fd);
        return -1;
    }
    return fd;
}

// Map the allocations of fds (their lengths lens, side by side) into one
// new range with access for the device of near (the memory the bytes are
// copied to or from) and for the thread's context's device, which runs
// the copy where they differ (a process with several GPUs): 0 and *base,
// or a negative libfabric error with nothing left mapped or reserved.
// The descriptors are closed either way.
int map_pieces(const efa_cuda_vmm_calls_t *cu, const std::vector<int> &fds,
               const std::vector<size_t> &lens, const void *near, void **base) {
    size_t total = 0;
    for (size_t len : lens) {
        total += len;
    }
    int device = 0, near_device = -1;
    efa_cu_ptr_t va = 0;
    if (0 != cu->context_device(&device) || 0 != cu->reserve(&va, total, 0, 0, 0)) {
        close_all(fds);
        return -FI_EAGAIN; // (no context on this thread, or no address room: not the memory's)
    }
    if (nullptr == near || 0 != cu->pointer_attribute(&near_device, kDeviceOrdinal,
                                                      reinterpret_cast<efa_cu_ptr_t>(near))) {
        near_device = device;
    }
    const efa_cu_access_desc_t access[2] = {{kLocationDevice, near_device, kReadWrite},
                                            {kLocationDevice, device, kReadWrite}};
    const size_t devices = near_device == device ? 1 : 2;
    int rc = 0;
    size_t done = 0, offset = 0; // (the pieces mapped, and where the next goes)
    for (; done < fds.size(); ++done) {
        efa_cu_handle_t h = 0;
        const efa_cu_ptr_t at = va + offset;
        if (0 != cu->import_handle(&h, reinterpret_cast<void *>(static_cast<intptr_t>(fds[done])),
                                   kPosixFd)) {
            rc = -FI_EACCES;
            break;
        }
        if (0 != cu->map(at, lens[done], 0, h, 0)) {
            rc = -FI_EINVAL; // (longer than the allocation: the sender's range was not it)
        } else if (0 != cu->set_access(at, lens[done], access, devices) &&
                   (1 == devices || (0 != cu->set_access(at, lens[done], &access[1], 1) &&
                                     0 != cu->set_access(at, lens[done], access, 1)))) {
            // (two devices refused: the context's alone, which runs the
            // copy, else near's alone)
            (void)cu->unmap(at, lens[done]);
            rc = -FI_EACCES; // (another device's memory without peer access)
        }
        (void)cu->release(h); // (the mapping holds the memory)
        if (0 != rc) {
            break;
        }
        offset += lens[done];
    }
    close_all(fds); // (the imported handles hold the memory)
    if (0 != rc) {
        for (size_t i = 0, at = 0; i < done; at += lens[i], ++i) {
            (void)cu->unmap(va + at, lens[i]);
        }
        (void)cu->address_free(va, total);
        return rc;
    }
    {
        std::lock_guard<std::mutex> guard(g_lock);
        g_mapped[va] = lens;
    }
    *base = reinterpret_cast<void *>(va);
    return 0;
}

// A buffer over several pieces, as its export named it: each piece's
// descriptor, taken out of the sender, and length.
int take_pieces(uint32_t pid, const efa_device_ipc_t *in, std::vector<int> *fds,
                std::vector<size_t> *lens) {
    PiecesName name{};
    memcpy(&name, in->handle, sizeof(name));
    if (name.count < 2 || name.count > kMaxPieces) {
        return -FI_EINVAL;
    }
    NoteHeader header{};
    std::vector<NoteEntry> entries;
    std::vector<uint64_t> ids;
    try { // (before any descriptor is taken)
        entries.resize(name.count);
        ids.resize(name.count);
        fds->reserve(name.count);
        lens->reserve(name.count);
    } catch (const std::bad_alloc &) {
        return -FI_ENOMEM;
    }
    const int note_fd = efa_fd_from_process(pid, static_cast<int>(in->held - 1));
    if (note_fd < 0) {
        return note_fd;
    }
    struct stat first {};
    const size_t entries_len = entries.size() * sizeof(NoteEntry);
    const bool read_it =
        kNoteSeals == fcntl(note_fd, F_GET_SEALS) && 0 == fstat(note_fd, &first) &&
        first.st_size == static_cast<off_t>(note_size(name.count)) &&
        sizeof(header) == static_cast<size_t>(pread(note_fd, &header, sizeof(header), 0)) &&
        entries_len == static_cast<size_t>(pread(note_fd, entries.data(), entries_len,
                                                 static_cast<off_t>(sizeof(header))));
    close(note_fd);
    for (uint32_t i = 0; i < name.count; ++i) {
        ids[i] = entries[i].buffer_id;
    }
    const PiecesName named = pieces_name(ids.data(), name.count);
    uint64_t total = 0;
    bool ok = read_it && 0 == memcmp(header.magic, kNoteMagic, sizeof(kNoteMagic)) &&
              header.count == name.count && 0 == memcmp(&named, &name, sizeof(name));
    for (uint32_t i = 0; ok && i < name.count; ++i) {
        ok = 0 != entries[i].len && entries[i].len <= in->alloc_len - total && entries[i].fd >= 0;
        total += ok ? entries[i].len : 0;
    }
    if (!ok || total != in->alloc_len) {
        return -FI_EINVAL; // (not this message's note)
    }
    for (const NoteEntry &entry : entries) {
        const int fd = efa_fd_from_process(pid, entry.fd);
        if (fd < 0) {
            close_all(*fds);
            fds->clear();
            lens->clear();
            return fd;
        }
        fds->push_back(fd);
        lens->push_back(entry.len);
    }
    // The sender closes the note before the pieces: the note still there
    // once the pieces are taken, they are the ones it names, not numbers
    // another export took again after the message was let go.
    const int again = efa_fd_from_process(pid, static_cast<int>(in->held - 1));
    struct stat now {};
    const bool same = again >= 0 && 0 == fstat(again, &now) && now.st_dev == first.st_dev &&
                      now.st_ino == first.st_ino;
    if (again >= 0) {
        close(again);
    }
    if (!same) {
        close_all(*fds);
        fds->clear();
        lens->clear();
        return -FI_EINVAL;
    }
    return 0;
}

} // namespace

extern "C" bool efa_cuda_vmm_is_export(const efa_device_ipc_t *h) {
    return 0 != h->held && (0 == memcmp(h->handle, kMagic, sizeof(kMagic)) ||
                            0 == memcmp(h->handle, kPiecesMagic, sizeof(kPiecesMagic)));
}

extern "C" int efa_cuda_vmm_export(const efa_cuda_vmm_calls_t *cu, const void *buf, size_t len,
                                   efa_device_ipc_t *out) {
    const auto p = reinterpret_cast<efa_cu_ptr_t>(buf);
    std::vector<Piece> pieces;
    if (0 == len || !pieces_of(cu, p, len, &pieces)) {
        return -FI_EINVAL;
    }
    std::vector<int> fds;
    std::vector<uint64_t> ids;
    bool room = true;
    try { // (before any descriptor is made)
        fds.reserve(pieces.size());
        ids.reserve(pieces.size());
    } catch (const std::bad_alloc &) {
        room = false;
    }
    HeldFds budget(pieces.size() + (pieces.size() > 1 ? 1 : 0)); // (the note)
    if (!room || !budget.taken()) {
        for (const Piece &piece : pieces) {
            (void)cu->release(piece.handle);
        }
        return room ? -FI_EAGAIN : -FI_ENOMEM; // (the message streams)
    }
    size_t total = 0;
    for (const Piece &piece : pieces) {
        int fd = -1;
        if (0 == cu->export_handle(&fd, piece.handle, kPosixFd, 0) && fd >= 0) {
            fds.push_back(fd);
        }
        total += piece.len;
        (void)cu->release(piece.handle); // (the retain's; the descriptor holds the memory)
    }
    if (fds.size() != pieces.size()) {
        close_all(fds);
        return -FI_EINVAL; // (made without the descriptor handle type)
    }
    memset(out, 0, sizeof(*out));
    int held = fds[0];
    if (1 == pieces.size()) {
        VmmName name{};
        memcpy(name.magic, kMagic, sizeof(kMagic));
        name.buffer_id = pieces[0].buffer_id;
        memcpy(out->handle, &name, sizeof(name));
    } else {
        held = write_note(pieces, fds);
        if (held < 0) {
            close_all(fds);
            return -FI_ENOMEM;
        }
        for (const Piece &piece : pieces) {
            ids.push_back(piece.buffer_id); // (reserved above)
        }
        const PiecesName name = pieces_name(ids.data(), static_cast<uint32_t>(ids.size()));
        memcpy(out->handle, &name, sizeof(name));
        try {
            std::lock_guard<std::mutex> guard(g_lock);
            g_held_pieces[held] = std::move(fds);
        } catch (const std::bad_alloc &) {
            close_all(fds);
            close(held);
            return -FI_ENOMEM;
        }
    }
    out->alloc_len = total;
    out->offset = p - pieces[0].base;
    out->held = static_cast<uint64_t>(held) + 1;
    budget.keep(); // (given back by efa_cuda_vmm_release)
    // VMM memory takes no SYNC_MEMOPS: a synchronous copy into it (from
    // pageable memory) may return before its bytes have landed, and the
    // peer's copy runs on its own stream.  The default stream, behind
    // which such copies queue, is waited for before the peer hears.
    if (cu->stream_synchronize) {
        (void)cu->stream_synchronize(EFA_CU_STREAM_LEGACY);
    }
    return 0;
}

extern "C" void efa_cuda_vmm_release(uint64_t held) {
    if (0 == held) {
        return;
    }
    const int fd = static_cast<int>(held - 1);
    std::vector<int> pieces;
    {
        std::lock_guard<std::mutex> guard(g_lock);
        auto it = g_held_pieces.find(fd);
        if (it != g_held_pieces.end()) {
            pieces = std::move(it->second);
            g_held_pieces.erase(it);
        }
    }
    close(fd); // (the note first: see take_pieces)
    close_all(pieces);
    HeldFds::give_back(1 + pieces.size());
}

extern "C" int efa_cuda_vmm_import(const efa_cuda_vmm_calls_t *cu, uint32_t pid,
                                   const efa_device_ipc_t *in, void **base) {
    return efa_cuda_vmm_import_near(cu, pid, in, nullptr, base);
}

extern "C" int efa_cuda_vmm_import_near(const efa_cuda_vmm_calls_t *cu, uint32_t pid,
                                        const efa_device_ipc_t *in, const void *near, void **base) {
    if (!efa_cuda_vmm_is_export(in) || 0 == in->alloc_len || in->held > INT32_MAX) {
        return -FI_EINVAL;
    }
    std::vector<int> fds;
    std::vector<size_t> lens;
    if (0 == memcmp(in->handle, kPiecesMagic, sizeof(kPiecesMagic))) {
        const int rc = take_pieces(pid, in, &fds, &lens);
        if (0 != rc) {
            return rc;
        }
    } else {
        const int fd = efa_fd_from_process(pid, static_cast<int>(in->held - 1));
        if (fd < 0) {
            return fd;
        }
        fds.push_back(fd);
        lens.push_back(in->alloc_len);
    }
    return map_pieces(cu, fds, lens, near, base);
}

extern "C" bool efa_cuda_vmm_close(const efa_cuda_vmm_calls_t *cu, void *base) {
    const auto va = reinterpret_cast<efa_cu_ptr_t>(base);
    std::vector<size_t> lens;
    {
        std::lock_guard<std::mutex> guard(g_lock);
        auto it = g_mapped.find(va);
        if (it == g_mapped.end()) {
            return false;
        }
        lens = std::move(it->second);
        g_mapped.erase(it);
    }
    size_t total = 0;
    for (size_t len : lens) {
        (void)cu->unmap(va + total, len);
        total += len;
    }
    (void)cu->address_free(va, total);
    return true;
}
