-- Answers the daemon's questions to the user: permission requests and
-- `tandem/requestUserInput`. Both wait for the user without blocking the
-- editor: Neovim runs a server request's handler in a coroutine and sends
-- the handler's return value, so the handler yields until `vim.ui`
-- answers. `<Esc>` (a nil choice) answers "cancelled": the turn goes on.
local config = require('tandem.config')

local M = {}

--- Runs `ask(done)` and waits (yielding the handler's coroutine) until
--- `done(value)` is called; returns that value.
local function await(ask)
  local co = coroutine.running()
  if not co or not coroutine.isyieldable() then
    -- Not inside a server request: answer synchronously.
    local value, answered = nil, false
    ask(function(v)
      value, answered = v, true
    end)
    vim.wait(60 * 60 * 1000, function()
      return answered
    end, 20)
    return value
  end
  local answered = false
  ask(function(value)
    if answered then
      return
    end
    answered = true
    -- Resume from the event loop, never from inside the callback that
    -- vim.ui may call before `ask` has even returned.
    vim.schedule(function()
      coroutine.resume(co, value)
    end)
  end)
  return coroutine.yield()
end
M.await = await

--- `tandem/requestPermission`: the four options with vim.ui.select.
function M.permission(params)
  local options = params.options or {}
  local choice
  if config.current.on_permission then
    choice = config.current.on_permission(params)
  else
    local title = params.toolCall and params.toolCall.title or 'a tool call'
    local picked = await(function(done)
      vim.ui.select(options, {
        prompt = 'tandem wants to: ' .. title,
        kind = 'tandem.permission',
        format_item = function(option)
          return option.name
        end,
      }, function(option)
        done(option)
      end)
    end)
    choice = picked and picked.optionId
  end
  if not choice then
    return { outcome = { outcome = 'cancelled' } }
  end
  return { outcome = { outcome = 'selected', optionId = choice } }
end

local OTHER = 'Other…'

local function ask_one(question)
  local options = question.options or {}
  if #options == 0 then
    return await(function(done)
      vim.ui.input({ prompt = question.question .. ' ' }, done)
    end)
  end
  local items = vim.list_slice(options)
  table.insert(items, { label = OTHER })
  local picked = await(function(done)
    vim.ui.select(items, {
      prompt = question.question,
      kind = 'tandem.question',
      format_item = function(item)
        return item.description and (item.label .. ' — ' .. item.description) or item.label
      end,
    }, done)
  end)
  if picked == nil then
    return nil
  end
  if picked.label == OTHER then
    return await(function(done)
      vim.ui.input({ prompt = question.question .. ' ' }, done)
    end)
  end
  return picked.label
end

--- `tandem/requestUserInput`: one question after another; a cancelled
--- one cancels the request.
function M.user_input(params)
  local answers = {}
  for _, question in ipairs(params.questions or {}) do
    local answer = ask_one(question)
    if answer == nil then
      return { outcome = 'cancelled' }
    end
    answers[question.id] = answer
  end
  return { answers = answers }
end

return M
