# frozen_string_literal: true

# veyyon Ruby kernel runner: one retained Ruby process serving code cells over the same NDJSON
# protocol as runner.py and runner.mjs.
#
# Standard library only, Ruby 2.7+. Start it as `ruby runner.rb` with the protocol on fd 3, a
# socket the host both writes requests to and reads frames from (spawn with stdio
# ["ignore", "pipe", "pipe", "pipe"]). Without an open fd 3 it serves stdin/stdout instead,
# for piping a script of requests by hand. Frames never travel on fd 1 or fd 2: both are pipes
# the runner reads, so $stdout, $stderr, STDOUT.syswrite, puts and the output of child
# processes become stdout/stderr frames, and nothing a cell prints can pass for a frame. Child
# processes never inherit the channel. Loading this file with `require` does not start a server.
#
# The protocol (frames, their order, executionCount, interrupts, bad input, the bridge) is
# PROTOCOL.md at the root of the repository, checked against the host's schemas.
#
# Cells are evaluated in one binding whose self is `main`, as IRB does: local variables,
# methods and constants persist across cells. The value of the last expression is the result
# (its `inspect` as text/plain, plus the rich MIME types display() would add), except when it
# is nil, when the last statement is an assignment or a def/class/module, when the cell is
# silent, or when the cell's last token is a `;` (Ruby has no use for a trailing `;`, so as in
# IPython it marks "no result"). An exception becomes an error frame with the exception's
# class, message and backtrace (the runner's own frames removed). SIGINT raises Interrupt in
# the cell (done.cancelled is then true unless the cell rescued it); between cells it is
# ignored.
#
# display(obj, ...) (a method of `main`, also Veyyon.display) sends one display frame per
# object: text/plain is obj.inspect; obj.to_mime_bundle / to_iruby_mimebundle (a Hash of MIME
# type to data), to_iruby ([mime, data]), and to_html, to_markdown, to_svg, to_latex, to_png,
# to_jpeg add rich types. A Hash whose keys are all MIME types ("text/html", "image/png", ...)
# is an explicit bundle; display(hash, raw: true) insists on that; display(data, mime: "text/html")
# sends data under one type. Binary image data is sent base64-encoded.
#
# Snapshots and restores of the user's state (locals, definitions from the cell history,
# libraries and their load path, cwd, env) are snapshot.rb's.

require "json"
require "ripper"
require "socket"
require_relative "egress"
require_relative "introspect"
require_relative "snapshot"

module Veyyon
  # A bridge call the host answered with an error; message is "name: message".
  class BridgeError < StandardError
    attr_reader :name, :reason

    def initialize(name, reason)
      @name = name
      @reason = reason
      super("#{name}: #{reason}")
    end
  end

  # The kernel services the prelude and cells use; the runner fills them in when it serves.
  module Runtime
    module_function

    def runner
      @runner or raise RuntimeError, "this helper needs the veyyon Ruby kernel (the runner is not serving)"
    end

    def attach(runner)
      @runner = runner
    end

    def serving?
      !@runner.nil?
    end
  end

  module_function

  # Sends each object as a display frame (see runner.rb's header for the MIME hooks).
  def display(*objs, raw: false, mime: nil)
    Runtime.runner.display(objs, raw: raw, mime: mime)
    nil
  end

  # Sends a status event {"op": op, **fields}; does nothing outside a kernel.
  def emit_status(op, **fields)
    Runtime.runner.emit_status(op.to_s, fields) if Runtime.serving?
    nil
  end

  # Asks the host to run method(params) and returns its answer; raises BridgeError.
  def bridge_call(method, params = {})
    Runtime.runner.bridge_call(method.to_s, params)
  end
end

module VeyyonRunner
  STATUS_MIME = "application/x-veyyon-status"
  CHUNK_BYTES = 64 * 1024
  MAX_PLAIN_CHARS = 1_000_000
  PROTOCOL_ERROR = "ProtocolError"
  PRELUDE_MARK = "# veyyon prelude (Ruby)"
  PRELUDE_FILE = "<veyyon prelude>"
  RUNNER_FILE = File.expand_path(__FILE__)
  INTERRUPT_MESSAGE = "the cell was interrupted (SIGINT)"
  MIME_TYPE = %r{\A[a-z]+/[A-Za-z0-9.+\-]+\z}.freeze
  IMAGE_MIMES = %w[image/png image/jpeg image/gif image/webp].freeze
  RICH_METHODS = [
    ["text/html", :to_html],
    ["text/markdown", :to_markdown],
    ["image/svg+xml", :to_svg],
    ["text/latex", :to_latex],
    ["image/png", :to_png],
    ["image/jpeg", :to_jpeg],
    ["image/jpeg", :to_jpg]
  ].freeze
  MAX_INTROSPECT_CODE = 1 << 20
  MAX_INTROSPECT_THREADS = 4
  MAX_SOURCES_BYTES = 16 << 20
  NO_RESULT_NODES = %i[assign opassign massign def defs class module sclass].freeze
  END_OF_INPUT = Object.new.freeze

  # One execute request from the host.
  Request = Struct.new(:id, :code, :silent, :store_history, :cwd, :env)
  # A complete or inspect request: kind is "complete" or "inspect"; cursor counts code points.
  Query = Struct.new(:kind, :id, :code, :cursor, :detail)
  # A request line that is not valid: its id (or nil) and why.
  Invalid = Struct.new(:id, :text)
  # A snapshot request: budgets in bytes, known the digest the host holds (or nil).
  SnapshotRequest = Struct.new(:id, :budget, :value_budget, :known)
  # One piece of a restore (base64 data); the one with more false ends it.
  RestorePiece = Struct.new(:id, :data, :more, :execution_count)
  # A whole restore: its pieces decoded, in order.
  RestoreRequest = Struct.new(:id, :pieces, :execution_count)
  # A snapshot or restore line that is not valid: answered as that kind's failure.
  StateInvalid = Struct.new(:type, :id, :text)
  # A bridge call waiting for the host's answer.
  BridgeCall = Struct.new(:request_id, :method_name, :answer, :resumed)

  # JSON-safe copies of values: NaN/Infinity -> nil, odd objects -> inspect, bad UTF-8 scrubbed.
  module Jsonable
    module_function

    def text(value)
      s = value.to_s
      s = s.dup.force_encoding(Encoding::UTF_8) unless s.encoding == Encoding::UTF_8
      s.valid_encoding? ? s : s.scrub("\uFFFD")
    end

    def convert(value, depth = 0)
      return value.inspect if depth > 64

      case value
      when nil, true, false, Integer then value
      when Float then value.finite? ? value : nil
      when String then text(value)
      when Symbol then text(value.to_s)
      when Hash then value.each_with_object({}) { |(k, v), out| out[text(k)] = convert(v, depth + 1) }
      when Array then value.map { |v| convert(v, depth + 1) }
      else text(value.inspect)
      end
    end
  end

  # Decodes host lines into requests; a pure function of the line.
  module Protocol
    module_function

    # [:execute, Request] | [:query, Query] | [:exit] | [:bridge_result, Hash] | [:invalid, Invalid] |
    # [:snapshot, SnapshotRequest] | [:restore, RestorePiece] | [:state_invalid, StateInvalid]
    def classify(line)
      message = begin
        JSON.parse(line)
      rescue JSON::ParserError, EncodingError => e
        return [:invalid, Invalid.new(nil, "malformed request line (not JSON): #{e.message.lines.first.to_s.strip}")]
      end
      unless message.is_a?(Hash)
        return [:invalid, Invalid.new(nil, "malformed request line: expected a JSON object, got #{json_kind(message)}")]
      end

      kind = message["type"]
      return [:exit] if kind == "exit"
      if kind == "bridge_result"
        return message["callId"].is_a?(String) ? [:bridge_result, message] : [:invalid, Invalid.new(nil, "bridge_result without a string callId")]
      end
      return parse_query(message) if kind == "complete" || kind == "inspect"
      return parse_state_request(message) if kind == "snapshot" || kind == "restore"
      unless kind.nil? || kind == "execute"
        id = message["id"].is_a?(String) ? message["id"] : nil
        return [:invalid, Invalid.new(id, "unknown message type #{JSON.generate(kind)}")]
      end
      parse_request(message)
    end

    def parse_request(message)
      id = message["id"]
      return [:invalid, Invalid.new(nil, "request id must be a string, got #{json_kind(id)}")] unless id.is_a?(String)

      invalid = ->(text) { [:invalid, Invalid.new(id, "request #{JSON.generate(id)}: #{text}")] }
      return invalid.call("code must be a string") unless message["code"].is_a?(String)

      silent = message.fetch("silent", false)
      store_history = message.fetch("storeHistory", true)
      return invalid.call("silent and storeHistory must be booleans") unless boolean?(silent) && boolean?(store_history)

      cwd = message["cwd"]
      return invalid.call("cwd must be a string") unless cwd.nil? || cwd.is_a?(String)

      env = message["env"]
      unless env.nil? || (env.is_a?(Hash) && env.values.all? { |v| v.nil? || v.is_a?(String) })
        return invalid.call("env must map names to strings (or null to unset)")
      end

      [:execute, Request.new(id, message["code"], silent, store_history, cwd, env)]
    end

    # A complete/inspect line as a Query (a bad cursor means the end of the code, as in the other runners).
    def parse_query(message)
      id = message["id"]
      return [:invalid, Invalid.new(nil, "#{message['type']} request id must be a string")] unless id.is_a?(String)

      code = message["code"]
      unless code.is_a?(String) && code.length <= MAX_INTROSPECT_CODE
        return [:invalid, Invalid.new(id, "code must be a string of at most #{MAX_INTROSPECT_CODE} characters")]
      end

      cursor = message["cursorPos"]
      cursor = code.length unless cursor.is_a?(Integer) && cursor.between?(0, code.length)
      [:query, Query.new(message["type"], id, code, cursor, message["detailLevel"] == 1 ? 1 : 0)]
    end

    # A snapshot request or one restore piece; a malformed one with an id is answered as its kind's failure.
    def parse_state_request(message)
      id = message["id"]
      return [:invalid, Invalid.new(nil, "#{message['type']} request id must be a string")] unless id.is_a?(String)

      if message["type"] == "snapshot"
        budget = message["budget"]
        value_budget = message["valueBudget"]
        known = message["known"]
        unless budget.is_a?(Numeric) && budget >= 0 && value_budget.is_a?(Numeric) && value_budget >= 0 && (known.nil? || known.is_a?(String))
          return [:state_invalid, StateInvalid.new("snapshot", id, "budget and valueBudget must be numbers of bytes, known a string")]
        end

        return [:snapshot, SnapshotRequest.new(id, budget, value_budget, known)]
      end
      count = message["executionCount"]
      unless message["data"].is_a?(String) && boolean?(message["more"]) && (count.nil? || (count.is_a?(Integer) && count >= 0))
        return [:state_invalid, StateInvalid.new("restore", id, "a restore piece needs data (a string), more (a boolean) and at most a whole executionCount")]
      end

      [:restore, RestorePiece.new(id, message["data"], message["more"], count)]
    end

    def boolean?(value)
      value == true || value == false
    end

    def json_kind(value)
      case value
      when nil then "null"
      when Array then "array"
      when String then "string"
      when Numeric then "number"
      when true, false then "boolean"
      else "object"
      end
    end
  end

  # Splits a byte stream into valid UTF-8 text, holding back a multibyte character cut in two.
  class Utf8Decoder
    def initialize
      @held = "".b
    end

    def decode(bytes)
      data = @held + bytes.b
      cut = incomplete_tail(data)
      @held = data.byteslice(data.bytesize - cut, cut)
      Jsonable.text(data.byteslice(0, data.bytesize - cut))
    end

    def finish
      rest = @held
      @held = "".b
      Jsonable.text(rest)
    end

    private

    def incomplete_tail(data)
      size = data.bytesize
      (1..[3, size].min).each do |back|
        byte = data.getbyte(size - back)
        next if (byte & 0xC0) == 0x80

        need = if byte >= 0xF0 then 4 elsif byte >= 0xE0 then 3 elsif byte >= 0xC0 then 2 else 1 end
        return need > back ? back : 0
      end
      0
    end
  end

  # The kernel: the channel, output pumps, the binding, SIGINT and the bridge.
  class Server
    def initialize(channel_in, channel_out)
      @in = channel_in
      @out = channel_out
      @out.sync = true
      @send_lock = Mutex.new
      @output_lock = Mutex.new
      @state_lock = Mutex.new
      @requests = Queue.new
      @sigints = Queue.new
      @current_id = nil
      @active = false
      @active_seq = nil
      @interrupted = false
      @execution_count = 0
      @cell_seq = 0
      @bridge_calls = {}
      @input_closed = false
      @call_seq = 0
      @protected = { locals: [], methods: [], constants: [], ivars: [], globals: [], features: [] }
      @queries = 0
      @sources = {}
      @sources_bytes = 0
      @main_thread = Thread.current
      @binding_ = TOPLEVEL_BINDING.eval("binding")
      @baseline = {
        methods: Object.private_instance_methods(false), constants: Object.constants,
        ivars: @binding_.receiver.instance_variables, globals: global_variables, features: $LOADED_FEATURES.dup,
        load_path: $LOAD_PATH.dup
      }
      @pending_cells = 0
      @definitions = []
      @restore_pieces = {}
      @env_baseline = ENV.to_h
    end

    attr_writer :execution_count

    # Serves requests until an exit request, the end of input, or the host's death.
    def serve
      install_output
      install_main
      Veyyon::Runtime.attach(self)
      Thread.handle_interrupt(Interrupt => :never) do
        trap("INT", "IGNORE")
        # SIGTERM ends the process as in the other runners, instead of raising SignalException in a cell.
        trap("TERM", "SYSTEM_DEFAULT")
        start_thread("sigint") { deliver_interrupts }
        start_thread("reader") { read_requests }
        start_thread("parent") { watch_parent(Process.ppid) }
        VeyyonEgress.start(ENV, method(:diagnose))
        loop { handle(@requests.pop) }
      end
    end

    # ----------------------------------------------------------------------------------------
    # Frames

    def send_frame(frame)
      line = JSON.generate(frame) << "\n"
      Thread.handle_interrupt(Interrupt => :never) { @send_lock.synchronize { @out.write(line) } }
    rescue Errno::EPIPE, Errno::ECONNRESET, IOError
      Process.exit!(0)
    end

    def emit_status(op, fields = {}, request_id = @current_id)
      return if request_id.nil?

      flush_output
      send_frame(type: "display", id: request_id, bundle: { STATUS_MIME => Jsonable.convert({ "op" => op }.merge(fields.transform_keys(&:to_s))) })
    end

    def diagnose(text)
      @diag.write("veyyon runner: #{text}\n")
    rescue StandardError
      nil
    end

    # ----------------------------------------------------------------------------------------
    # Output: fd 1 and fd 2 are pipes read into stdout/stderr frames

    def install_output
      @diag = STDERR.dup
      @diag.sync = true
      @pipes = {}
      { "stdout" => STDOUT, "stderr" => STDERR }.each do |kind, io|
        reader, writer = IO.pipe
        io.reopen(writer)
        writer.close
        io.sync = true
        @pipes[kind] = [reader, Utf8Decoder.new]
      end
      $stdout = STDOUT
      $stderr = STDERR
      start_thread("output") { pump_output }
    end

    def pump_output
      readers = @pipes.values.map(&:first)
      loop do
        ready, = IO.select(readers)
        @output_lock.synchronize { ready.each { |reader| drain(reader) } }
      end
    end

    def drain(reader)
      kind, (_, decoder) = @pipes.find { |_, (r, _)| r.equal?(reader) }
      loop do
        chunk = reader.read_nonblock(CHUNK_BYTES, exception: false)
        break if chunk == :wait_readable || chunk.nil?

        text = decoder.decode(chunk)
        send_frame(type: kind, id: @current_id, data: text) unless text.empty? || @current_id.nil?
      end
    end

    # Sends every byte the cell wrote to fd 1 and fd 2 so far, before the frame that follows.
    def flush_output
      return if @pipes.nil?

      Thread.handle_interrupt(Interrupt => :never) do
        @output_lock.synchronize { @pipes.each_value { |reader, _| drain(reader) } }
      end
    end

    def finish_output
      @output_lock.synchronize do
        @pipes.each do |kind, (reader, decoder)|
          drain(reader)
          text = decoder.finish
          send_frame(type: kind, id: @current_id, data: text) unless text.empty? || @current_id.nil?
        end
      end
    end

    # ----------------------------------------------------------------------------------------
    # display() and MIME bundles

    def install_main
      main = @binding_.receiver
      main.define_singleton_method(:display) do |*objs, raw: false, mime: nil|
        Veyyon.display(*objs, raw: raw, mime: mime)
      end
    end

    def display(objs, raw: false, mime: nil)
      bundles = objs.map do |obj|
        if mime
          bundle = {}
          add_entry(bundle, mime.to_s, obj)
          bundle["text/plain"] ||= plain_text(obj)
          bundle
        elsif raw
          raise TypeError, "display(bundle, raw: true) takes Hashes of MIME type to data, e.g. {\"text/html\" => \"<b>hi</b>\"}" unless obj.is_a?(Hash)

          explicit_bundle(obj)
        else
          mime_bundle(obj)
        end
      end
      return if @current_id.nil?

      Thread.handle_interrupt(Interrupt => :never) do
        flush_output
        bundles.each { |bundle| send_frame(type: "display", id: @current_id, bundle: bundle) }
      end
    end

    def mime_bundle(value)
      return explicit_bundle(value) if mime_hash?(value)

      bundle = {}
      hooks(value, bundle)
      bundle["text/plain"] = plain_text(value) unless bundle["text/plain"].is_a?(String)
      bundle
    end

    def mime_hash?(value)
      Hash === value && !value.empty? && value.keys.all? { |k| k.is_a?(String) && MIME_TYPE.match?(k) }
    end

    def explicit_bundle(hash)
      bundle = {}
      hash.each { |mime, data| add_entry(bundle, mime.to_s, data) }
      bundle
    end

    def hooks(value, bundle)
      %i[to_mime_bundle to_iruby_mimebundle].each do |name|
        next unless responds?(value, name)

        data = attempt { value.public_send(name) }
        data = data.first if data.is_a?(Array) && data.first.is_a?(Hash)
        data.each { |mime, v| add_entry(bundle, mime.to_s, v) } if data.is_a?(Hash)
        return unless bundle.empty?
      end
      if responds?(value, :to_iruby)
        pair = attempt { value.to_iruby }
        add_entry(bundle, pair[0].to_s, pair[1]) if pair.is_a?(Array) && pair.size == 2
      end
      RICH_METHODS.each do |mime, name|
        next if bundle.key?(mime) || !responds?(value, name)

        data = attempt { value.public_send(name) }
        add_entry(bundle, mime, data) unless data.nil?
      end
    end

    def responds?(value, name)
      value.respond_to?(name)
    rescue StandardError
      false
    end

    def attempt
      yield
    rescue StandardError
      nil
    end

    def add_entry(bundle, mime, data)
      return if data.nil?

      if IMAGE_MIMES.include?(mime)
        bundle[mime] = image_data(data)
      elsif mime == "application/json" || (mime.end_with?("+json") && !data.is_a?(String))
        bundle[mime] = Jsonable.convert(data)
      else
        bundle[mime] = Jsonable.text(data.is_a?(String) ? data : data.to_s)
      end
    end

    def image_data(data)
      bytes = data.to_s
      binary = bytes.encoding == Encoding::BINARY || !bytes.dup.force_encoding(Encoding::UTF_8).valid_encoding? ||
               bytes.start_with?("\x89PNG".b) || bytes.b.start_with?("\xFF\xD8".b)
      binary ? [bytes.b].pack("m0") : bytes.delete("\n")
    end

    def class_name(value)
      value.class.name
    rescue NoMethodError
      "BasicObject"
    end

    def plain_text(value)
      text = begin
        Jsonable.text(value.inspect)
      rescue StandardError, NotImplementedError => e
        "#<#{class_name(value)} (inspect raised #{e.class})>"
      end
      text.length > MAX_PLAIN_CHARS ? "#{text[0, MAX_PLAIN_CHARS]}… [#{text.length - MAX_PLAIN_CHARS} characters omitted]" : text
    end

    # ----------------------------------------------------------------------------------------
    # Host bridge

    def bridge_call(method, params)
      request_id = @state_lock.synchronize { @active ? @current_id : nil }
      raise Veyyon::BridgeError.new("BridgeCancelled", "no cell is running; agent() and completion() work only while the cell that calls them runs") if request_id.nil?

      begin
        params_json = Jsonable.convert(params)
        JSON.generate(params_json)
      rescue StandardError => e
        raise TypeError, "bridge params must be JSON: #{e.message}"
      end
      call = BridgeCall.new(request_id, method, Queue.new, false)
      Thread.handle_interrupt(Interrupt => :never) do
        call_id = @state_lock.synchronize do
          raise no_host(method) if @input_closed

          @call_seq += 1
          "c#{@call_seq}".tap { |id| @bridge_calls[id] = call }
        end
        emit_status("timeout", { action: "pause" }, request_id)
        send_frame(type: "bridge", id: request_id, callId: call_id, method: method, params: params_json)
      end
      ok, value = call.answer.pop
      raise value unless ok

      value
    end

    def resolve_bridge(message)
      call = @state_lock.synchronize { @bridge_calls.delete(message["callId"]) }
      if call.nil?
        diagnose("bridge_result for unknown callId #{message['callId'].inspect} ignored")
        return
      end
      resume_call(call)
      if message["ok"] == true
        call.answer << [true, message["value"]]
      else
        error = message["error"]
        failure = if error.is_a?(Hash)
                    Veyyon::BridgeError.new((error["name"] || "Error").to_s, (error["message"] || "").to_s)
                  else
                    Veyyon::BridgeError.new(PROTOCOL_ERROR, "malformed bridge_result: #{JSON.generate(error)}")
                  end
        call.answer << [false, failure]
      end
    end

    def resume_call(call)
      return if call.resumed

      call.resumed = true
      emit_status("timeout", { action: "resume" }, call.request_id)
    end

    def abandon_bridge_calls(request_id)
      calls = @state_lock.synchronize do
        ids = @bridge_calls.select { |_, c| c.request_id == request_id }.keys
        ids.map { |id| @bridge_calls.delete(id) }
      end
      calls.each do |call|
        resume_call(call)
        call.answer << [false, Veyyon::BridgeError.new("BridgeCancelled", "the cell ended before the host answered")]
      end
    end

    # ----------------------------------------------------------------------------------------
    # SIGINT: ignored by the process between cells (so a signal sent then is dropped as it is
    # sent, and child processes a cell starts get the default action). While a cell runs the
    # trap only queues the cell's number; a thread raises Interrupt in the main thread while
    # that same cell is active (a signal still queued when its cell ended never reaches the
    # next one), and the main thread accepts it only inside the cell's code.

    def deliver_interrupts
      loop do
        seq = @sigints.pop
        @state_lock.synchronize do
          if @active && seq == @active_seq
            @interrupted = true
            @main_thread.raise(Interrupt, INTERRUPT_MESSAGE)
          end
        end
      end
    end

    def enter_cell(request)
      seq = @cell_seq
      @state_lock.synchronize do
        @current_id = request.id
        @interrupted = false
        @active_seq = seq
        @active = true
      end
      trap("INT") { @sigints << seq }
    end

    def leave_cell
      @state_lock.synchronize do
        @active = false
        # Every Interrupt raised into the cell and not yet taken goes now (a burst of SIGINTs can
        # leave several), so none is left to fire in the next cell.
        while Thread.pending_interrupt?
          begin
            Thread.handle_interrupt(Interrupt => :immediate) { Thread.pass }
          rescue Interrupt
            nil
          end
        end
      end
      trap("INT", "IGNORE")
    end

    # ----------------------------------------------------------------------------------------
    # Requests

    # Reads host lines until the end of the input or an exit request, which ends it the same way.
    def read_requests
      while (line = @in.gets)
        next if line.strip.empty?

        begin
          break if route(line) == :exit
        rescue StandardError => e
          diagnose("could not handle a host line: #{e.class}: #{e.message}")
        end
      end
      end_of_input
    rescue IOError, SystemCallError
      end_of_input
    end

    def no_host(method)
      Veyyon::BridgeError.new("BridgeCancelled", "the runner's input has ended, so no host can answer this #{method} call (run without a host, the runner has no bridge)")
    end

    # Nobody can answer a bridge call any more: the calls fail, the queued requests still run.
    def end_of_input
      @requests << END_OF_INPUT
      calls = @state_lock.synchronize do
        @input_closed = true
        @bridge_calls.keys.map { |id| @bridge_calls.delete(id) }
      end
      calls.each do |call|
        resume_call(call)
        call.answer << [false, no_host(call.method_name)]
      end
    end

    def route(line)
      kind, payload = Protocol.classify(line.dup.force_encoding(Encoding::UTF_8))
      case kind
      when :execute
        @state_lock.synchronize { @pending_cells += 1 }
        @requests << payload
      when :snapshot then @requests << payload
      when :restore then receive_restore_piece(payload)
      when :state_invalid then answer_invalid_state(payload)
      when :exit then :exit
      when :bridge_result then resolve_bridge(payload)
      when :query then start_query(payload)
      when :invalid then payload.id.nil? ? protocol_error(nil, payload.text) : @requests << payload
      end
    end

    def receive_restore_piece(piece)
      pieces = (@restore_pieces[piece.id] ||= [])
      pieces << piece.data.unpack1("m")
      return if piece.more

      @restore_pieces.delete(piece.id)
      @requests << RestoreRequest.new(piece.id, pieces, piece.execution_count)
    end

    def answer_invalid_state(invalid)
      if invalid.type == "snapshot"
        send_frame(type: "snapshot_done", id: invalid.id, status: "failed", names: [], skipped: [], error: invalid.text)
      else
        @restore_pieces.delete(invalid.id)
        send_frame(type: "restore_done", id: invalid.id, restored: [], skipped: [], error: invalid.text)
      end
    end

    # Answers a complete/inspect on a thread of its own, beside any running cell; never a cell.
    def start_query(query)
      admitted = @state_lock.synchronize { @queries < MAX_INTROSPECT_THREADS && (@queries += 1) }
      return query_failed(query, "the kernel is still answering earlier completion requests") unless admitted

      Thread.new do
        Thread.current.report_on_exception = false
        begin
          answer_query(query)
        rescue Exception => e # rubocop:disable Lint/RescueException
          query_failed(query, "#{e.class}: #{e.message}")
        ensure
          @state_lock.synchronize { @queries -= 1 }
        end
      end
    end

    def answer_query(query)
      if query.kind == "complete"
        matches, start = Introspect.complete(@binding_, query.code, query.cursor)
        send_frame(type: "complete_reply", id: query.id, matches: matches.map { |m| Jsonable.text(m) }, cursorStart: start, cursorEnd: query.cursor)
      else
        text = Introspect.inspect_text(@binding_, query.code, query.cursor, query.detail, @sources)
        send_frame(type: "inspect_reply", id: query.id, found: !text.nil?, bundle: text.nil? ? {} : { "text/plain" => Jsonable.text(text) })
      end
    end

    def query_failed(query, why)
      reply = { type: "#{query.kind}_reply", id: query.id, error: Jsonable.text(why)[0, 1000] }
      send_frame(reply.merge(query.kind == "complete" ? { matches: [], cursorStart: 0, cursorEnd: 0 } : { found: false, bundle: {} }))
    end

    # Keeps a cell's code for `obj??` (the newest cells' up to MAX_SOURCES_BYTES in all).
    def remember_source(filename, code)
      @sources[filename] = code
      @sources_bytes += code.bytesize
      while @sources_bytes > MAX_SOURCES_BYTES && @sources.size > 1
        _, dropped = @sources.shift
        @sources_bytes -= dropped.bytesize
      end
    end

    def protocol_error(id, text)
      send_frame(type: "error", id: id, ename: PROTOCOL_ERROR, evalue: text, traceback: ["#{PROTOCOL_ERROR}: #{text}"])
    end

    def shutdown
      flush_output
    ensure
      Process.exit!(0)
    end

    def handle(item)
      shutdown if item.equal?(END_OF_INPUT)
      @state_lock.synchronize { @pending_cells -= 1 } if item.is_a?(Request)
      if item.is_a?(SnapshotRequest)
        Snapshot.snapshot(self, item)
      elsif item.is_a?(RestoreRequest)
        Snapshot.restore(self, item)
      elsif item.is_a?(Invalid)
        protocol_error(item.id, item.text)
        send_frame(type: "done", id: item.id, status: "error", executionCount: @execution_count, cancelled: false)
      else
        handle_request(item)
      end
    rescue Exception => e # rubocop:disable Lint/RescueException
      diagnose("internal error: #{e.class}: #{e.message}")
      if item.is_a?(SnapshotRequest)
        send_frame(type: "snapshot_done", id: item.id, status: "failed", names: [], skipped: [], error: "internal error: #{e.class}: #{e.message}")
      elsif item.is_a?(RestoreRequest)
        send_frame(type: "restore_done", id: item.id, restored: [], skipped: [], error: "internal error: #{e.class}: #{e.message}")
      elsif item.respond_to?(:id)
        send_frame(type: "done", id: item.id, status: "error", executionCount: @execution_count, cancelled: false)
      end
    end

    def handle_request(request)
      @cell_seq += 1
      @execution_count += 1 if !request.silent && request.store_history
      before = request.silent ? names_now : nil
      @output_lock.synchronize do
        @pipes.each_value { |reader, _| drain(reader) }
        enter_cell(request)
        send_frame(type: "started", id: request.id)
      end
      failure = nil
      begin
        Thread.handle_interrupt(Interrupt => :immediate) do
          apply_context(request)
          run_cell(request) unless request.code.strip.empty?
        end
      rescue Exception => e # rubocop:disable Lint/RescueException
        failure = e
      ensure
        leave_cell
      end
      finish_request(request, failure, before)
    end

    def finish_request(request, failure, before)
      protect_new_names(before) if before
      # The host's init request (silent, not stored, carrying the session's env): what a snapshot's env is measured against.
      @env_baseline = ENV.to_h if request.silent && !request.store_history && request.env
      abandon_bridge_calls(request.id)
      finish_output
      send_frame({ type: "error", id: request.id }.merge(error_fields(failure))) if failure
    ensure
      cancelled = !failure.nil? && @interrupted
      send_frame(type: "done", id: request.id, status: failure ? "error" : "ok", executionCount: @execution_count, cancelled: cancelled)
    end

    def apply_context(request)
      Dir.chdir(request.cwd) if request.cwd
      request.env&.each { |key, value| value.nil? ? ENV.delete(key) : ENV[key] = value }
    end

    def run_cell(request)
      filename = request.silent && request.code.start_with?(PRELUDE_MARK) ? PRELUDE_FILE : cell_filename(request)
      unless filename == PRELUDE_FILE
        remember_source(filename, request.code)
        Snapshot.record_definitions(@definitions, filename, request.code)
      end
      value = @binding_.eval(request.code, filename, 1)
      return if NilClass === value || request.silent || no_result?(request.code)

      @binding_.local_variable_set(:_, value) if request.store_history
      bundle = mime_bundle(value)
      flush_output
      send_frame(type: "result", id: request.id, bundle: bundle)
    end

    # `<cell-N>` for a cell that gets execution count N; `<hidden-K>` (K counts all requests) for the rest.
    def cell_filename(request)
      !request.silent && request.store_history ? "<cell-#{@execution_count}>" : "<hidden-#{@cell_seq}>"
    end

    # True when the cell ends with `;`, or its last statement is an assignment or a definition.
    def no_result?(code)
      last = Ripper.lex(code).reverse_each.find { |(_, type, _)| !%i[on_sp on_nl on_ignored_nl on_comment on_embdoc on_embdoc_beg on_embdoc_end].include?(type) }
      return true if last && last[1] == :on_semicolon

      tree = Ripper.sexp(code)
      statement = tree && tree[1].is_a?(Array) ? tree[1].last : nil
      statement.is_a?(Array) && NO_RESULT_NODES.include?(statement.first)
    end

    # ----------------------------------------------------------------------------------------
    # Errors

    def error_fields(error)
      ename = error.class.name || error.class.inspect
      evalue = Jsonable.text(error.message)
      frames = (error.backtrace || []).reject { |line| runner_frame?(line) }
      head = frames.empty? ? "" : "#{frames.first}: "
      first = "#{head}#{evalue} (#{ename})"
      { ename: ename, evalue: evalue, traceback: [first] + frames.drop(1).map { |line| "\tfrom #{Jsonable.text(line)}" } }
    end

    def runner_frame?(line)
      path = line.split(":", 2).first
      path == RUNNER_FILE || path == PRELUDE_FILE || File.expand_path(path) == RUNNER_FILE
    rescue StandardError
      false
    end

    # ----------------------------------------------------------------------------------------
    # Names: what cells defined, minus what silent requests (the prelude) defined

    def names_now
      {
        locals: @binding_.local_variables,
        methods: Object.private_instance_methods(false),
        constants: Object.constants,
        ivars: @binding_.receiver.instance_variables,
        globals: global_variables,
        features: $LOADED_FEATURES.dup
      }
    end

    def protect_new_names(before)
      now = names_now
      now.each_key { |kind| @protected[kind] |= (now[kind] - before[kind]) }
    end

    # User-defined names: [[name, value-or-method], ...] for defs().
    def user_definitions
      base = @baseline
      locals = (@binding_.local_variables - @protected[:locals] - [:_]).map { |n| [n.to_s, @binding_.local_variable_get(n)] }
      methods = (Object.private_instance_methods(false) - base[:methods] - @protected[:methods]).map { |n| [n.to_s, Object.instance_method(n)] }
      constants = (Object.constants - base[:constants] - @protected[:constants]).map { |n| [n.to_s, Object.const_get(n)] }
      (locals + methods + constants).sort_by(&:first)
    end

    # ----------------------------------------------------------------------------------------
    # Snapshots and restores (snapshot.rb)

    # Whether an execute request waits: a snapshot then yields to it.
    def cell_waiting?
      @state_lock.synchronize { @pending_cells.positive? }
    end

    # In a forked snapshot writer: the protocol channel and the output pipes are the kernel's, not
    # its. An IO the dead reader thread was blocked on "closes" without closing its descriptor,
    # so each descriptor is closed again through an IO of its own.
    def close_channel_in_child
      ios = [@in, @out, *@pipes.values.map(&:first)]
      fds = ios.map do |io|
        io.fileno
      rescue IOError
        nil
      end
      ios.each do |io|
        io.close
      rescue IOError, SystemCallError
        nil
      end
      fds.compact.uniq.each do |fd|
        IO.for_fd(fd, autoclose: true).close
      rescue IOError, SystemCallError, ArgumentError
        nil
      end
    end

    # What a snapshot saves: {values: [[kind, name, value]], definitions:, skipped:, features:, env:}.
    def snapshot_state
      main = @binding_.receiver
      values = []
      skipped = []
      (@binding_.local_variables - @protected[:locals] - [:_]).sort.each { |n| values << ["local", n.to_s, @binding_.local_variable_get(n)] }
      (main.instance_variables - @baseline[:ivars] - @protected[:ivars]).sort.each { |n| values << ["ivar", n.to_s, main.instance_variable_get(n)] }
      (global_variables - @baseline[:globals] - @protected[:globals]).sort.each do |n|
        values << ["global", n.to_s, TOPLEVEL_BINDING.eval(n.to_s)] if Snapshot::GLOBAL.match?(n.to_s)
      end
      defined = lambda do |name|
        Object.const_defined?(name, false) && !Object.autoload?(name) && Object.const_get(name).is_a?(Module)
      rescue StandardError, NameError
        false
      end
      methods = Object.private_instance_methods(false) - @baseline[:methods] - @protected[:methods]
      definitions = @definitions.select do |entry|
        case entry["kind"]
        when "def" then methods.include?(entry["name"].to_sym)
        when "defs" then main.singleton_methods(false).include?(entry["name"].to_sym)
        when "sclass" then true
        else defined.call(entry["name"])
        end
      end
      recorded = definitions.map { |entry| entry["name"] }
      methods.each do |name|
        skipped << { "name" => name.to_s, "reason" => "its definition is not in the cell history (define_method?), so it cannot be saved" } unless recorded.include?(name.to_s)
      end
      (Object.constants - @baseline[:constants] - @protected[:constants]).sort.each do |name|
        next if Object.autoload?(name)

        value = begin
          Object.const_get(name)
        rescue StandardError, NameError
          next
        end
        if !value.is_a?(Module)
          values << ["const", name.to_s, value]
        elsif !recorded.include?(name.to_s) && Object.const_source_location(name.to_s)&.first.to_s.start_with?("<")
          skipped << { "name" => name.to_s, "reason" => "its definition is not in the cell history, so it cannot be saved" }
        end
      end
      features = $LOADED_FEATURES - @baseline[:features] - @protected[:features]
      load_path = ($LOAD_PATH - @baseline[:load_path]).map(&:to_s)
      env_set = ENV.to_h.reject { |key, value| @env_baseline[key] == value }.sort.to_h
      env_unset = (@env_baseline.keys - ENV.keys).sort
      { values: values, definitions: definitions, skipped: skipped, features: features, load_path: load_path, env: { "set" => env_set, "unset" => env_unset } }
    end

    # Runs one recorded definition again, where and as its cell did, and keeps it in the history.
    def replay_definition(entry)
      @binding_.eval(entry["source"].to_s, entry["file"].to_s, Integer(entry["line"]))
      Snapshot.remember(@definitions, entry.slice("kind", "name", "file", "line", "source"))
    end

    # Sets one restored value: a local, one of main's instance variables, a global or a constant.
    def restore_value(kind, name, value)
      case kind
      when "local"
        raise NameError, "#{name} is not a local variable name" unless Snapshot::NAME.match?(name)

        @binding_.local_variable_set(name.to_sym, value)
      when "ivar"
        raise NameError, "#{name} is not an instance variable name" unless Snapshot::IVAR.match?(name)

        @binding_.receiver.instance_variable_set(name, value)
      when "global"
        raise NameError, "#{name} is not a global variable name" unless Snapshot::GLOBAL.match?(name)

        Thread.current[:veyyon_restoring] = value
        TOPLEVEL_BINDING.eval("#{name} = Thread.current[:veyyon_restoring]")
      when "const"
        raise NameError, "#{name} is not a constant name" unless Snapshot::CONSTANT.match?(name)

        Object.send(:remove_const, name) if Object.const_defined?(name, false)
        Object.const_set(name, value)
      else
        raise NameError, "unknown kind #{kind}"
      end
    ensure
      Thread.current[:veyyon_restoring] = nil
    end

    # ----------------------------------------------------------------------------------------
    # Threads and the host

    def start_thread(name, &block)
      Thread.new do
        Thread.current.name = "veyyon-#{name}"
        Thread.current.report_on_exception = false
        begin
          block.call
        rescue Exception => e # rubocop:disable Lint/RescueException
          diagnose("#{name} thread failed: #{e.class}: #{e.message}")
          Process.exit!(1)
        end
      end
    end

    def watch_parent(parent)
      loop do
        sleep 1
        Process.exit!(0) if Process.ppid != parent
      end
    end
  end

  module_function

  # The channel: fd 3 when it is a socket or FIFO, else stdin/stdout (moved off fd 0 and fd 1).
  def open_channel
    stat = begin
      IO.for_fd(3, autoclose: false).stat
    rescue SystemCallError, ArgumentError
      nil
    end
    if stat && (stat.socket? || stat.pipe?)
      input = IO.for_fd(3, "r", autoclose: false)
      input.close_on_exec = true
      return [input, IO.for_fd(3, "w", autoclose: false)]
    end
    input = STDIN.dup
    output = STDOUT.dup
    [input, output].each { |io| io.close_on_exec = true }
    STDIN.reopen(File.open(File::NULL, "r"))
    [input, output]
  end

  # Serves the protocol until an exit request, the end of input, or the host's death.
  def main
    verbose = $VERBOSE
    $VERBOSE = nil
    Encoding.default_external = Encoding::UTF_8
    Encoding.default_internal = nil
    $VERBOSE = verbose
    input, output = open_channel
    input.set_encoding(Encoding::BINARY)
    output.set_encoding(Encoding::BINARY)
    server = Server.new(input, output)
    server.serve
  end
end

VeyyonRunner.main if $PROGRAM_NAME == __FILE__ || File.expand_path($PROGRAM_NAME) == VeyyonRunner::RUNNER_FILE
