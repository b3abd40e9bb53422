# frozen_string_literal: true

# Snapshots and restores of the session's user state for the Ruby runner (PROTOCOL.md,
# "Snapshots and restores").
#
# What is saved: the cells' local variables, main's instance variables, globals and constants
# a cell set, through one Marshal dump (one memo, so two names bound to one object come back
# as one object); classes, modules and methods defined at the top level of a cell as their
# definition source from the cell history (replayed, in the order the cells ran them, before
# the data that refers to them); libraries a cell required (required again first, after the
# load path entries they added, e.g. by activating a gem); the working directory and the
# environment variables that differ from the environment after init.
#
# The payload: "VEYYONRB", the format version and the header's length (two uint32 BE), the
# header (JSON: the load path additions, the libraries, the definitions with their file and
# line, the values' kinds and names in the order of the Marshal data, the names left out and
# why, cwd, env, and the data's SHA-256), then the Marshal data: an Array of the values.
#
# A small namespace is saved in the kernel at once (faster than a fork). A bigger one is built
# in a forked child when the platform forks (the child ignores SIGINT, closes the protocol
# channel and only writes to a pipe of its own), so the kernel answers a cell that arrives
# within HOLD_SECONDS: the child is killed and the snapshot yields unless it ends by then.
# Without fork it is built in the kernel, yielding between values.

require "digest"
require "json"

module VeyyonRunner
  # Snapshots and restores; the server gives it the names and the channel.
  module Snapshot
    MAGIC = "VEYYONRB".b.freeze
    FORMAT_VERSION = 1
    CHUNK_BYTES = 4 * 1024 * 1024
    CHILD_LIMIT_SECONDS = 600
    # How long a cell that arrives waits for the writer before it is killed: a small snapshot
    # ends within it instead of costing the session its snapshot.
    HOLD_SECONDS = 0.02
    # A namespace of at most QUICK_VALUES shallowly small values is first built in the kernel,
    # given QUICK_SECONDS between values.
    QUICK_VALUES = 200
    QUICK_SECONDS = 0.01
    # Bytes of header kept free for each name a payload lists (its kind, or why it was left out).
    HEADER_ROOM = 256
    DEFINITION_NODES = {
      CLASS: "class", MODULE: "module", DEFN: "def", DEFS: "defs", SCLASS: "sclass", CDECL: "const"
    }.freeze
    NAME = /\A[A-Za-z_][A-Za-z0-9_]*\z/.freeze
    GLOBAL = /\A\$[A-Za-z_][A-Za-z0-9_]*\z/.freeze
    CONSTANT = /\A[A-Z][A-Za-z0-9_]*\z/.freeze
    IVAR = /\A@[A-Za-z_][A-Za-z0-9_]*\z/.freeze
    # A cell that may define something: only these are parsed, so a plain cell costs one scan.
    MAY_DEFINE = /\b(?:class|module|def)\b|\b[A-Z]\w*\s*=(?![=~>])/.freeze

    # Why a restore cannot read a payload at all.
    class Unreadable < StandardError; end

    module_function

    # A size as people read it: binary units with one decimal, a trailing ".0" dropped
    # (`512 bytes`, `1.5 KiB`, `256 MiB`, `1.2 GiB`). The JavaScript runner writes the same.
    def readable_size(bytes)
      return "#{bytes} bytes" if bytes < 1024

      units = %w[KiB MiB GiB TiB]
      value = bytes / 1024.0
      unit = 0
      while value >= 1024 && unit < units.size - 1
        value /= 1024
        unit += 1
      end
      "#{format('%.1f', value).sub(/\.0\z/, '')} #{units[unit]}"
    end

    # ----------------------------------------------------------------------------------------
    # The cell history: each top-level class, module, def and constant assignment of a cell

    # Appends the top-level definitions of code (run as filename) to history, in order; a later
    # def or constant assignment of the same name replaces the earlier entries for it.
    def record_definitions(history, filename, code)
      return unless defined?(RubyVM::AbstractSyntaxTree) && MAY_DEFINE.match?(code)

      body = begin
        RubyVM::AbstractSyntaxTree.parse(code).children[2]
      rescue SyntaxError, StandardError
        nil
      end
      return if body.nil?

      lines = code.b.lines
      statements = body.type == :BLOCK ? body.children : [body]
      statements.each do |node|
        next unless node.is_a?(RubyVM::AbstractSyntaxTree::Node)

        kind = DEFINITION_NODES[node.type]
        next if kind.nil?

        name = definition_name(node, kind)
        next if name.nil?

        source = slice(lines, node)
        next if source.nil?

        remember(history, "kind" => kind, "name" => name, "file" => filename, "line" => node.first_lineno, "source" => source)
      end
    end

    # Appends one definition to history; a def or constant assignment replaces the earlier
    # entries it makes moot (the same method; anything that defined the same constant).
    def remember(history, entry)
      name = entry["name"]
      kind = entry["kind"]
      history.reject! { |old| old["name"] == name && old["kind"] == kind } if %w[def defs].include?(kind)
      history.reject! { |old| old["name"] == name && old["kind"] != "def" && old["kind"] != "defs" } if kind == "const"
      history << entry
    end

    def definition_name(node, kind)
      case kind
      when "def" then node.children[0].to_s
      # `def self.name` only: a singleton method of another object goes (or not) with that object.
      when "defs" then node.children[0].is_a?(RubyVM::AbstractSyntaxTree::Node) && node.children[0].type == :SELF ? node.children[1].to_s : nil
      when "sclass" then node.children[0]&.type == :SELF ? "class << self" : nil
      else
        path = node.children[0]
        path = path.children.last if path.is_a?(RubyVM::AbstractSyntaxTree::Node) && path.type == :COLON3
        path = top_segment(path)
        path&.to_s
      end
    end

    def top_segment(path)
      return path if path.is_a?(Symbol)
      return nil unless path.is_a?(RubyVM::AbstractSyntaxTree::Node)

      case path.type
      when :COLON2 then path.children[0].nil? ? path.children[1] : top_segment(path.children[0])
      when :CONST then path.children[0]
      end
    end

    def slice(lines, node)
      first = node.first_lineno - 1
      last = node.last_lineno - 1
      return nil if first.negative? || last >= lines.size

      if first == last
        text = lines[first].byteslice(node.first_column, node.last_column - node.first_column)
      else
        text = lines[first].byteslice(node.first_column..) + lines[(first + 1)...last].join + lines[last].byteslice(0, node.last_column)
      end
      text = text.dup.force_encoding(Encoding::UTF_8)
      text.valid_encoding? ? text : nil
    end

    # ----------------------------------------------------------------------------------------
    # Snapshot

    def snapshot(server, request)
      return answer(server, request.id, "yielded") if server.cell_waiting?

      built = build_quickly(server, request)
      built = build_in_child(server, request) if built.nil?
      built = build(server, request, -> { server.cell_waiting? }) if built.nil?
      return answer(server, request.id, "yielded") if built == :yielded
      return answer(server, request.id, "failed", error: built[:error], skipped: built[:skipped] || []) if built[:error]

      payload = built[:payload]
      fields = { digest: built[:digest], bytes: payload.bytesize, names: built[:names], skipped: built[:skipped] }
      return answer(server, request.id, "unchanged", **fields) if built[:digest] == request.known
      return answer(server, request.id, "yielded") if server.cell_waiting?

      offset = 0
      while offset < payload.bytesize
        server.send_frame(type: "snapshot_chunk", id: request.id, data: [payload.byteslice(offset, CHUNK_BYTES)].pack("m0"))
        offset += CHUNK_BYTES
      end
      answer(server, request.id, "saved", **fields)
    rescue StandardError, ScriptError => e
      answer(server, request.id, "failed", error: "the snapshot failed: #{e.class}: #{e.message}")
    end

    def answer(server, id, status, names: [], skipped: [], **fields)
      server.send_frame({ type: "snapshot_done", id: id, status: status, names: names, skipped: skipped }.merge(fields))
    end

    # A small namespace (every value shallowly small, none with a dump hook of its own) is built
    # in the kernel, in about a millisecond, which is faster than a fork; nil when it is not
    # small, or takes longer than QUICK_SECONDS after all (then the forked writer builds it).
    def build_quickly(server, request)
      values = server.snapshot_state[:values]
      return nil unless values.size <= QUICK_VALUES && values.all? { |_, _, value| small?(value) }

      started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      built = build(server, request, -> { Process.clock_gettime(Process::CLOCK_MONOTONIC) - started > QUICK_SECONDS }, whole_first: true)
      built == :yielded ? nil : built
    end

    def small?(value)
      return false if value.respond_to?(:marshal_dump) || value.respond_to?(:_dump)

      case value
      when String then value.bytesize <= 64 * 1024
      when Array, Hash then value.size <= 1000
      else true
      end
    rescue StandardError, NoMethodError
      false
    end

    # Builds the payload in a forked child; nil when there is no fork (then the kernel builds it).
    def build_in_child(server, request)
      return nil unless Process.respond_to?(:fork)

      reader, writer = IO.pipe
      pid = begin
        fork do
          trap("INT", "IGNORE")
          reader.close
          server.close_channel_in_child
          result = begin
            build(server, request, -> { false }, whole_first: true)
          rescue Exception => e # rubocop:disable Lint/RescueException
            { error: "the snapshot failed: #{e.class}: #{e.message}" }
          end
          writer.binmode
          payload = result[:payload] || "".b
          meta = JSON.generate(result.reject { |key, _| key == :payload }.merge(payloadBytes: payload.bytesize))
          writer.write([meta.bytesize].pack("N"), meta, payload)
          writer.close
          Process.exit!(0)
        end
      rescue NotImplementedError, SystemCallError
        reader.close
        writer.close
        return nil
      end
      writer.close
      collect_child(server, pid, reader)
    end

    def collect_child(server, pid, reader)
      data = +"".b
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + CHILD_LIMIT_SECONDS
      waiting_since = nil
      loop do
        now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
        waiting_since = server.cell_waiting? ? (waiting_since || now) : nil
        return stop_child(pid, reader, :yielded) if waiting_since && now - waiting_since >= HOLD_SECONDS
        if now > deadline
          return stop_child(pid, reader, { error: "the snapshot took longer than #{CHILD_LIMIT_SECONDS} s and was given up" })
        end

        next unless IO.select([reader], nil, nil, 0.005)

        chunk = reader.read_nonblock(1 << 20, exception: false)
        next if chunk == :wait_readable
        break if chunk.nil?

        data << chunk
      end
      reader.close
      Process.wait(pid)
      return { error: "the snapshot's writer ended without an answer" } if data.bytesize < 4

      meta_size = data.unpack1("N")
      meta = JSON.parse(data.byteslice(4, meta_size))
      payload = data.byteslice(4 + meta_size, data.bytesize - 4 - meta_size)
      return { error: meta["error"], skipped: meta["skipped"] } if meta["error"]
      return { error: "the snapshot's writer ended early" } if payload.bytesize != meta["payloadBytes"]

      { payload: payload, digest: meta["digest"], names: meta["names"], skipped: meta["skipped"] }
    end

    def stop_child(pid, reader, outcome)
      begin
        Process.kill(:KILL, pid)
      rescue SystemCallError
        nil
      end
      reader.close
      begin
        Process.wait(pid)
      rescue SystemCallError
        nil
      end
      outcome
    end

    # {payload:, digest:, names:, skipped:} or :yielded (when yield_now.call says a cell waits).
    # whole_first (the forked writer, which nothing waits on): one dump of every value first,
    # and a dump of each value on its own only when that one fails or passes a budget.
    def build(server, request, yield_now, whole_first: false)
      state = server.snapshot_state
      definitions = state[:definitions]
      # The header counts against the budget too (the host takes no byte past it): its
      # definitions, libraries, cwd and env as they are, and room for each name it will list.
      used = JSON.generate([definitions, state[:features], state[:load_path], state[:env], Dir.pwd]).bytesize +
             HEADER_ROOM * (state[:values].size + state[:skipped].size + 16)
      if whole_first
        whole = build_whole(state, request, used)
        return whole unless whole.nil?
      end
      skipped = state[:skipped].dup
      accepted = []
      state[:values].each do |kind, name, value|
        return :yielded if yield_now.call

        size = begin
          Marshal.dump(value).bytesize
        rescue StandardError => e
          skipped << { "name" => name, "reason" => unsaveable(value, e) }
          next
        end
        if size > request.value_budget
          skipped << { "name" => name, "reason" => "#{readable_size(size)} over the #{readable_size(request.value_budget)} budget" }
        elsif used + size > request.budget
          skipped << { "name" => name, "reason" => "#{readable_size(size)} over the #{readable_size(request.budget)} budget of the whole session (#{readable_size(used)} taken before it)" }
        else
          used += size
          accepted << [kind, name, value]
        end
      end
      return :yielded if yield_now.call

      built = assemble(state, accepted, skipped, Marshal.dump(accepted.map(&:last)))
      return built if built[:payload].bytesize <= request.budget

      { error: "the snapshot is #{readable_size(built[:payload].bytesize)}, over the #{readable_size(request.budget)} budget", skipped: skipped }
    end

    # Every value in one dump, those Marshal surely refuses left out first; nil when the dump
    # fails or is over a budget (then each value is dumped on its own to find which).
    def build_whole(state, request, used)
      skipped = state[:skipped].dup
      accepted = state[:values].reject do |_, name, value|
        reason = surely_unsaveable(value)
        skipped << { "name" => name, "reason" => reason } unless reason.nil?
        !reason.nil?
      end
      data = begin
        Marshal.dump(accepted.map(&:last))
      rescue StandardError
        return nil
      end
      return nil if data.bytesize > request.value_budget || used + data.bytesize > request.budget

      built = assemble(state, accepted, skipped, data)
      built[:payload].bytesize <= request.budget ? built : nil
    end

    def assemble(state, accepted, skipped, data)
      definitions = state[:definitions]
      skipped = skipped.sort_by { |entry| entry["name"] }
      header = JSON.generate(
        "format" => FORMAT_VERSION,
        "ruby" => RUBY_VERSION,
        "loadPath" => state[:load_path],
        "features" => state[:features],
        "definitions" => definitions,
        "values" => accepted.map { |kind, name, _| [kind, name] },
        "skipped" => skipped,
        "cwd" => Dir.pwd,
        "env" => state[:env],
        "dataDigest" => Digest::SHA256.hexdigest(data)
      ).b
      payload = MAGIC + [FORMAT_VERSION, header.bytesize].pack("NN") + header + data
      names = (definitions.map { |entry| entry["name"] }.reject { |name| name == "class << self" } + accepted.map { |_, name, _| name }).uniq.sort
      { payload: payload, digest: Digest::SHA256.hexdigest(payload), names: names, skipped: skipped }
    end

    # The reason Marshal refuses value itself (not what it holds), or nil.
    def surely_unsaveable(value)
      case value
      when IO, Proc, Method, UnboundMethod, Enumerator, Thread, Thread::Mutex, Thread::Queue, Binding
        unsaveable(value, TypeError.new("can't dump #{value.class}"))
      when Hash
        value.default_proc && !value.respond_to?(:marshal_dump) ? unsaveable(value, TypeError.new("can't dump hash with default proc")) : nil
      end
    rescue StandardError, NoMethodError
      nil
    end

    # Why Marshal refused a value, in words a person reads.
    def unsaveable(value, error)
      if defined?(BasicSocket) && value.is_a?(BasicSocket) then "socket objects cannot be saved"
      elsif value.is_a?(IO) then "IO objects (open files, pipes) cannot be saved"
      elsif value.is_a?(Proc) || value.is_a?(Method) || value.is_a?(UnboundMethod) then "a #{value.class} cannot be saved"
      elsif value.is_a?(Enumerator) then "an Enumerator cannot be saved"
      elsif value.is_a?(Thread) || value.is_a?(Thread::Mutex) || value.is_a?(Thread::Queue) then "a #{value.class} cannot be saved"
      elsif value.is_a?(Binding) then "a Binding cannot be saved"
      else
        message = first_line(error)
        case message
        when /hash with default proc/ then "#{value.is_a?(Hash) && value.default_proc ? 'a Hash' : 'it holds a Hash'} with a default block, which cannot be saved"
        when /singleton can't be dumped/ then "#{value.singleton_methods.empty? ? 'it holds an object' : 'an object'} with singleton methods, which cannot be saved"
        when /anonymous (class|module)/ then "it holds an anonymous #{Regexp.last_match(1)} or an instance of one, which cannot be saved"
        when /no _dump_data is defined for class (\S+)/, /can't dump (\S+)/ then "it holds a #{Regexp.last_match(1)}, which cannot be saved"
        else "it cannot be saved (#{message})"
        end
      end
    rescue StandardError, NoMethodError
      "it cannot be saved (#{first_line(error)})"
    end

    def first_line(error)
      error.message.to_s.lines.first.to_s.strip
    end

    # ----------------------------------------------------------------------------------------
    # Restore

    def restore(server, request)
      header, data = read_payload(request.pieces.join)
      restored = []
      skipped = (header["skipped"] || []).map { |entry| { "name" => entry["name"].to_s, "reason" => entry["reason"].to_s } }
      Array(header["loadPath"]).each { |dir| $LOAD_PATH << dir.to_s unless $LOAD_PATH.include?(dir.to_s) }
      Array(header["features"]).each do |feature|
        require feature
      rescue StandardError, ScriptError => e
        skipped << { "name" => "require #{feature}", "reason" => "the library could not be loaded again: #{first_line(e)}" }
      end
      # Definitions in the order the cells ran them; one that needs a value (a constant a class
      # body reads) is tried again after the values.
      failed = replay(server, Array(header["definitions"]), restored)
      values = begin
        Marshal.load(data)
      rescue StandardError => e
        nil.tap do
          header["values"].each do |_, name|
            skipped << { "name" => name, "reason" => "the values could not be loaded: #{first_line(e)}" }
          end
        end
      end
      if values.is_a?(Array)
        header["values"].each_with_index do |(kind, name), index|
          server.restore_value(kind, name, values[index])
          restored << name
        rescue StandardError, NameError => e
          skipped << { "name" => name, "reason" => "it could not be set again: #{first_line(e)}" }
        end
      end
      replay(server, failed.map(&:first), restored).each do |entry, error|
        skipped << { "name" => entry["name"], "reason" => "its definition failed again: #{error.class}: #{first_line(error)}" }
      end
      cwd = header["cwd"]
      if cwd.is_a?(String)
        begin
          Dir.chdir(cwd)
        rescue SystemCallError => e
          skipped << { "name" => "working directory", "reason" => "#{cwd} cannot be entered again: #{e.message}" }
        end
      end
      env = header["env"] || {}
      (env["set"] || {}).each { |key, value| ENV[key.to_s] = value.to_s }
      (env["unset"] || []).each { |key| ENV.delete(key.to_s) }
      server.execution_count = request.execution_count if request.execution_count.is_a?(Integer) && request.execution_count >= 0
      server.send_frame(type: "restore_done", id: request.id, restored: restored.uniq.sort, skipped: skipped)
    rescue Unreadable => e
      server.send_frame(type: "restore_done", id: request.id, restored: [], skipped: [], error: e.message)
    end

    # Replays each definition; returns [[entry, error]] for those that failed.
    def replay(server, entries, restored)
      entries.each_with_object([]) do |entry, failed|
        server.replay_definition(entry)
        restored << entry["name"] unless entry["kind"] == "sclass"
      rescue StandardError, ScriptError => e
        failed << [entry, e]
      end
    end

    # [header, Marshal data] of a payload whose format and digest check; raises Unreadable.
    def read_payload(payload)
      payload = payload.b
      raise Unreadable, "the payload is not a Ruby runner's snapshot" unless payload.bytesize >= 16 && payload.byteslice(0, 8) == MAGIC

      version, size = payload.byteslice(8, 8).unpack("NN")
      raise Unreadable, "the snapshot has format #{version}; this runner reads format #{FORMAT_VERSION} only" unless version == FORMAT_VERSION
      raise Unreadable, "the snapshot is cut short" if 16 + size > payload.bytesize

      header = begin
        JSON.parse(payload.byteslice(16, size).force_encoding(Encoding::UTF_8))
      rescue JSON::ParserError, EncodingError => e
        raise Unreadable, "the snapshot's header is corrupt: #{e.message.lines.first.to_s.strip}"
      end
      raise Unreadable, "the snapshot's header is corrupt" unless header.is_a?(Hash) && header["values"].is_a?(Array) && header["definitions"].is_a?(Array)

      data = payload.byteslice(16 + size, payload.bytesize - 16 - size)
      raise Unreadable, "the snapshot's values are corrupt (their SHA-256 does not match)" unless Digest::SHA256.hexdigest(data) == header["dataDigest"]

      [header, data]
    end
  end
end
