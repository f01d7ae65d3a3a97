// Whole-database read and write.
#include "common/file.hpp"
#include "formats/db/db.hpp"

namespace hpc::db {
namespace fs = std::filesystem;

namespace {
template <typename T, typename F>
Expected<T> read_file_with(const fs::path& p, F&& read) {
  HPC_ASSIGN_OR_RETURN(MappedFile f, MappedFile::open(p));
  return read(f.view());
}
}  // namespace

Expected<Database> read_database(const fs::path& dir) {
  Database db;
  HPC_ASSIGN_OR_RETURN(db.meta, read_file_with<Meta>(dir / "meta.db", read_meta));
  HPC_ASSIGN_OR_RETURN(db.profiles, read_file_with<std::vector<Profile>>(dir / "profile.db", read_profile_db));
  HPC_ASSIGN_OR_RETURN(db.contexts, read_file_with<std::vector<ContextValues>>(dir / "cct.db", read_cct_db));
  std::error_code ec;
  if (fs::is_regular_file(dir / "trace.db", ec)) {
    HPC_ASSIGN_OR_RETURN(db.trace, read_file_with<TraceDb>(dir / "trace.db", read_trace_db));
  }
  return db;
}

Status check_replaceable(const fs::path& dir) {
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  // Nothing there, or a file on the way there (creating it then fails, saying so): nothing
  // to replace.
  if (ec == std::errc::no_such_file_or_directory || ec == std::errc::not_a_directory) return Status();
  if (ec) return Status::error(dir.string() + ": cannot tell what is there: " + ec.message());
  if (!fs::exists(st)) return Status();
  const std::string keep = "; it is left as it is: name a new database, or remove it first";
  if (!fs::is_directory(st)) return Status::error(dir.string() + ": exists and is not a directory" + keep);
  if (fs::is_regular_file(dir / "meta.db", ec) || fs::is_regular_file(dir / "experiment.xml", ec)) return Status();
  fs::directory_iterator it(dir, ec);
  if (ec) return Status::error(dir.string() + ": cannot list: " + ec.message());
  if (it == fs::directory_iterator()) return Status();  // empty
  return Status::error(dir.string() + ": exists and is not a database (no meta.db or experiment.xml in it)" + keep);
}

Status write_database(const Database& db, const fs::path& dir,
                      const std::function<Status(const fs::path&)>& extra) {
  HPC_RETURN_IF_ERROR(check_replaceable(dir));
  AtomicOutput out(dir, AtomicOutput::Kind::Directory);
  HPC_RETURN_IF_ERROR(out.begin());
  const fs::path& tmp = out.temp_path();
  HPC_RETURN_IF_ERROR(write_file_atomically(tmp / "meta.db", write_meta(db.meta)));
  HPC_RETURN_IF_ERROR(write_file_atomically(tmp / "profile.db", write_profile_db(db.profiles)));
  HPC_RETURN_IF_ERROR(write_file_atomically(tmp / "cct.db", write_cct_db(db.contexts)));
  if (db.trace) HPC_RETURN_IF_ERROR(write_file_atomically(tmp / "trace.db", write_trace_db(*db.trace)));
  if (extra) HPC_RETURN_IF_ERROR(extra(tmp));
  return out.commit();
}

}  // namespace hpc::db
